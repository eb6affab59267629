-- claim: lease up to a limit of due messages; expired leases become due again; on one
-- node, also take the concurrency slot of each leased message that is due now and
-- carries a limit the caller names (as ``slot_acquire`` does), so no call follows.
-- Returns now, the next due time (-1: none known) then per message its id, key, body,
-- attempt, due, lease deadline, timeout, priority, place in the ready line and the limit
-- whose slot it holds ('' for none: no limit, not due yet, or the limit is full).
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) C (KEYS[12]) F (KEYS[14]) W (KEYS[15])
--            and the holders and waiters ZSETs of the limits it takes slots of (not
--            declared: built from ARGV, so only on a single node, never on a cluster)
-- ARGV: limit, lookahead_ms, token, sweep_max, then optionally the queue, the limits'
--       key prefix ('{prefix:limit:') and (limit name, capacity) pairs
local limit, lookahead = tonumber(ARGV[1]), tonumber(ARGV[2])
local token, sweep = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
-- capacity of a limit key ("NAME" or "NAME:VALUE"; the longest name given that fits),
-- false for a limit not named
local capacities, known = {}, {}
for i = 7, #ARGV, 2 do capacities[ARGV[i]] = tonumber(ARGV[i + 1]) end
local function capacity(limit_key)
    local found = known[limit_key]
    if found ~= nil then return found end
    found = capacities[limit_key] or false
    if not found then
        local longest = 0
        for name, cap in pairs(capacities) do
            if #name > longest and string.sub(limit_key, 1, #name + 1) == name .. ':' then
                found, longest = cap, #name
            end
        end
    end
    known[limit_key] = found
    return found
end
-- take (or renew) a slot of limit_key for id, as ``slot_acquire``; true when taken
local function take_slot(limit_key, id, key, lease)
    local cap = capacity(limit_key)
    if not cap then return false end
    local holders = ARGV[6] .. limit_key .. '}:h'
    if not redis.call('ZSCORE', holders, id) then
        local held = redis.call('ZCARD', holders)
        if held >= cap then
            redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
            held = redis.call('ZCARD', holders)
        end
        if held >= cap then return false end
    end
    redis.call('ZADD', holders, now + lease, id)
    local member = ARGV[5] .. '\31' .. (key or '') .. '\31' .. id
    redis.call('ZREM', ARGV[6] .. limit_key .. '}:w', member)
    return true
end
-- leases that ran out are due again (their attempt was counted when claimed)
local expired = redis.call('ZRANGEBYSCORE', L, '-inf', now, 'LIMIT', 0, sweep)
for _, id in ipairs(expired) do
    redis.call('ZREM', L, id)
    redis.call('HDEL', T, id)
    local record = redis.call('HGET', M, id)
    if record then
        local priority, _, due, _, _, fair = parse(record)
        if fair then  -- waits for a new turn
            redis.call('ZADD', S, due, id)
        else
            redis.call('ZADD', R, ready_score(priority, due), id)
        end
    end
end
if #expired > 0 then redis.call('HINCRBY', C, 'redelivered', #expired) end
-- scheduled messages due by now + lookahead become ready, ordered by priority (and a
-- message with a fair-share key by its turn); they are the first of S, removed at once
local due_now = redis.call('ZRANGEBYSCORE', S, '-inf', now + lookahead, 'LIMIT', 0, sweep)
if #due_now > 0 then
    redis.call('ZREMRANGEBYRANK', S, 0, #due_now - 1)
    local line, adds = fair_line(), {}
    for _, id in ipairs(due_now) do
        local record = redis.call('HGET', M, id)
        if record then
            local priority, _, due, _, _, fair = parse(record)
            if fair then due = line.take(fair, due) end
            adds[#adds + 1] = ready_score(priority, due); adds[#adds + 1] = id
            if #adds >= 2000 then redis.call('ZADD', R, unpack(adds)); adds = {} end
        end
    end
    if #adds > 0 then redis.call('ZADD', R, unpack(adds)) end
    line.save()
end
-- priority aging: the ready messages whose promotion time has come go ahead of every
-- priority (record and ready score rewritten as PROMOTED, their place in the line kept);
-- one not ready then (running, or waiting for a retry) keeps its priority
local aged = redis.call('ZRANGEBYSCORE', W, '-inf', now, 'LIMIT', 0, sweep)
if #aged > 0 then
    redis.call('ZREMRANGEBYRANK', W, 0, #aged - 1)
    for _, id in ipairs(aged) do
        local score = redis.call('ZSCORE', R, id)
        local record = score and redis.call('HGET', M, id)
        if record then
            local priority, timeout, due, key, body, fair, limit_key = parse(record)
            if priority < PROMOTED then
                local place = tonumber(score) - (1023 - priority) * PRIORITY_STEP
                redis.call('HSET', M, id,
                           make_record(PROMOTED, timeout, due, key, body, fair, limit_key))
                redis.call('ZADD', R, ready_score(PROMOTED, place), id)
            end
        end
    end
end
local out = {now, -1}
if limit > 0 then
    local popped = redis.call('ZPOPMIN', R, limit)
    local claimed, fair_served, turn = 0, 0, false
    local ids = {}
    for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
    -- the batch's records and attempts read in one command each, its attempts, leases
    -- and tokens written in one each (``variadic``)
    local records, tries = {}, {}
    if #ids > 0 then records, tries = hmget(M, ids), hmget(A, ids) end
    local attempts, leases, tokens = {}, {}, {}
    for j, id in ipairs(ids) do
        local record = records[j]
        if record then
            local priority, timeout, due, key, body, fair, limit_key = parse(record)
            local place = tonumber(popped[2 * j]) - (1023 - priority) * PRIORITY_STEP
            if fair then
                fair_served = fair_served + 1
                turn = place
            end
            local attempt = tonumber(tries[j] or '0') + 1
            local deadline = math.max(now, due) + timeout
            attempts[#attempts + 1] = id; attempts[#attempts + 1] = attempt
            leases[#leases + 1] = deadline; leases[#leases + 1] = id
            tokens[#tokens + 1] = id; tokens[#tokens + 1] = token
            out[#out + 1] = id
            out[#out + 1] = key or ''
            out[#out + 1] = body
            out[#out + 1] = attempt
            out[#out + 1] = due
            out[#out + 1] = deadline
            out[#out + 1] = timeout
            out[#out + 1] = priority
            out[#out + 1] = place  -- its place in the line: due time, or turn
            if limit_key and due <= now and take_slot(limit_key, id, key, timeout) then
                out[#out + 1] = limit_key
            else
                out[#out + 1] = ''
            end
            claimed = claimed + 1
        end
    end
    variadic('HSET', A, attempts)
    variadic('ZADD', L, leases)
    variadic('HSET', T, tokens)
    if claimed > 0 then redis.call('HINCRBY', C, 'claimed', claimed) end
    if fair_served > 0 then  -- the line moved on: keys whose last turn it passed are done
        redis.call('HINCRBY', C, 'fair_ready', -fair_served)
        if turn > tonumber(redis.call('HGET', C, 'fair_vt') or turn) then
            redis.call('HSET', C, 'fair_vt', turn)
        end
        redis.call('ZREMRANGEBYSCORE', F, '-inf', '(' .. turn)
    end
end
if #out == 2 then
    local candidates = {}
    local first = redis.call('ZRANGE', S, 0, 0, 'WITHSCORES')
    if #first > 0 then candidates[#candidates + 1] = tonumber(first[2]) end
    first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
    if #first > 0 then candidates[#candidates + 1] = tonumber(first[2]) end
    if redis.call('ZCARD', R) > 0 then candidates[#candidates + 1] = now end
    if #candidates > 0 then out[2] = math.min(unpack(candidates)) end
end
return out
