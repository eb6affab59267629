-- enqueue: store messages (one shard), with the key-conflict mode and, when bounded, the
-- shard's share of the queue's bound: a message that would add to a full shard is 'full'
-- (not written); a replace or a duplicate adds nothing and always passes.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8]) C (KEYS[12]) B (KEYS[13]) W (KEYS[15])
-- ARGV: mode, bounded ('1' or '0'), count, then count x (id, key, priority, due_ms, record)
-- (a priority with a promotion time: ``priority_of``)
-- (a record with a fair-share key is placed as scheduled: see ``place``)
-- (the client builds each record; fresh messages take a fast path: HSETNX of the record
-- (and HSET of its key), and one ZADD per thousand messages)
local mode, count = ARGV[1], tonumber(ARGV[3])
local now = now_ms()
local function arg(i, f) return ARGV[3 + (i - 1) * 5 + f] end
-- room: how many more messages the shard takes (false: no bound applies)
local room = false
if ARGV[2] == '1' then
    local bound = redis.call('GET', B)
    if bound then room = tonumber(bound) - redis.call('HLEN', M) end
end
local function full() return room and room <= 0 end
local function took() if room then room = room - 1 end end
local function same(holder, i)
    if holder ~= arg(i, 1) then return false end
    local stored = redis.call('HGET', M, holder)
    if not stored then return false end
    local _, _, _, _, old = parse(stored)
    local _, _, _, _, new = parse(arg(i, 5))
    return old == new
end
if mode == 'error' then
    local taken = {}
    for i = 1, count do
        local key = arg(i, 2)
        if key ~= '' then
            local holder = redis.call('HGET', K, key)
            if holder and not same(holder, i) then taken[#taken + 1] = key end
        end
    end
    if #taken > 0 then
        table.insert(taken, 1, 'CONFLICT')
        return taken
    end
end
local ready, scheduled, added = {}, {}, 0
local function flush(force)
    if #ready >= 2000 or (force and #ready > 0) then
        redis.call('ZADD', R, unpack(ready)); ready = {}
    end
    if #scheduled >= 2000 or (force and #scheduled > 0) then
        redis.call('ZADD', S, unpack(scheduled)); scheduled = {}
    end
end
local function queue_up(id, priority, due, record, promote)
    age(id, promote)
    if due <= now and string.byte(record, 1) ~= 102 then  -- 'f': a fair-share key (place)
        ready[#ready + 1] = ready_score(priority, due); ready[#ready + 1] = id
    else
        scheduled[#scheduled + 1] = due; scheduled[#scheduled + 1] = id
    end
    added = added + 1
    flush(false)
end
local out = {}
for i = 1, count do
    local id, key, record = arg(i, 1), arg(i, 2), arg(i, 5)
    local priority, promote = priority_of(arg(i, 3))
    local due = tonumber(arg(i, 4))
    if key == '' then
        if mode ~= 'replace' then
            if full() then
                out[i] = redis.call('HEXISTS', M, id) == 1 and 'duplicate' or 'full'
            elseif redis.call('HSETNX', M, id, record) == 1 then
                queue_up(id, priority, due, record, promote)
                took()
                out[i] = 'enqueued'
            else
                out[i] = 'duplicate'
            end
        elseif full() and redis.call('HEXISTS', M, id) == 0 then
            out[i] = 'full'
        elseif redis.call('HSETNX', M, id, record) == 1 then
            out[i] = 'enqueued'; took()
            queue_up(id, priority, due, record, promote)
        else
            flush(true); remove(id); out[i] = 'replaced'
            redis.call('HSET', M, id, record)
            queue_up(id, priority, due, record, promote)
        end
    else
        -- the buffered ready and scheduled entries go out before a remove (which takes a
        -- message out of both), and only then: a fresh key adds to the buffers
        local holder = redis.call('HGET', K, key)
        if holder and same(holder, i) and mode ~= 'replace' then
            out[i] = 'duplicate'
        elseif holder and mode == 'ignore' then
            out[i] = 'ignored'
        elseif not holder and full() and redis.call('HEXISTS', M, id) == 0 then
            out[i] = 'full'
        else
            if holder then
                flush(true); remove(holder); out[i] = 'replaced'
            else
                out[i] = 'enqueued'; took()
            end
            if redis.call('HSETNX', M, id, record) == 0 then  -- its id, held without the key
                flush(true); remove(id); redis.call('HSET', M, id, record)
            end
            redis.call('HSET', K, key, id)
            queue_up(id, priority, due, record, promote)
        end
    end
end
flush(true)
if added > 0 then redis.call('HINCRBY', C, 'enqueued', added) end
return out
