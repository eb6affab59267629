-- Shared by every script (prepended when the scripts are loaded): the names of the
-- shard's fifteen keys, the record format and the helpers that keep them consistent.
--
-- KEYS (all of one shard S = {prefix}:{queue}:{n}, one hash tag, one cluster slot):
--   KEYS[1]  M   S:m   HASH  id -> record
--   KEYS[2]  S   S:s   ZSET  scheduled: id -> due_ms
--   KEYS[3]  R   S:r   ZSET  ready: id -> priority-and-due score
--   KEYS[4]  L   S:l   ZSET  leased: id -> lease deadline (ms)
--   KEYS[5]  T   S:t   HASH  id -> lease token
--   KEYS[6]  A   S:a   HASH  id -> attempts so far
--   KEYS[7]  E   S:e   HASH  id -> last error
--   KEYS[8]  K   S:k   HASH  key -> id
--   KEYS[9]  PM  S:pm  HASH  poisoned id -> record
--   KEYS[10] PF  S:pf  HASH  poisoned id -> failure
--   KEYS[11] PZ  S:pz  ZSET  poisoned id -> failed at (ms)
--   KEYS[12] C   S:c   HASH  counters
--   KEYS[13] B   S:b   STRING this shard's share of the queue's max_pending (absent: no bound)
--   KEYS[14] F   S:f   ZSET  fair-share key -> its last turn (see ``fair_line``)
--   KEYS[15] W   S:w   ZSET  id -> when it is promoted if still ready (see ``age``)
--   KEYS[16...]  S:h:{subject}  LIST  a ledger (ack, retry, poison: one per entry given)
local M, S, R, L, T, A, E, K, PM, PF, PZ, C, B, F, W =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
    KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15]

-- A ledger entry in ARGV at position ``at``: '0' for none, else "n|keep|ttl_ms" followed
-- by its n records in the next arguments (oldest first). When ``apply``, they go to the
-- head of the list ``key`` (newest first; each stored as "written_ms|expires_ms|record")
-- in one push, and the list expires ``ttl_ms`` after this write. It is trimmed to ``keep``
-- once it holds an eighth more (a trim per push cost as much again as the push). A
-- stamp is built once per script call and ttl (number-to-string conversions cost more
-- than the push). Returns the ARGV position after the entry.
local ledger_stamps = {}
local function ledger(at, key, apply, now)
    local n, keep, ttl = string.match(ARGV[at], '^(%d+)|(%d+)|(%d+)$')
    if not n then return at + 1 end
    n = tonumber(n)
    if apply then
        local stamp = ledger_stamps[ttl]
        if not stamp then
            stamp = now .. '|' .. (now + tonumber(ttl)) .. '|'
            ledger_stamps[ttl] = stamp
        end
        local length
        if n == 1 then
            length = redis.call('LPUSH', key, stamp .. ARGV[at + 1])
        else
            local records = {}
            for i = 1, n do records[i] = stamp .. ARGV[at + i] end
            length = redis.call('LPUSH', key, unpack(records))
        end
        keep = tonumber(keep)
        if length > keep + math.max(1, math.floor(keep / 8)) then
            redis.call('LTRIM', key, 0, keep - 1)
        end
        redis.call('PEXPIRE', key, ttl)
    end
    return at + n + 1
end

-- One command over many members (``HDEL M id1 id2 ...``, ``ZADD L d1 id1 d2 id2 ...``):
-- a batch's writes cost one command each instead of one per message. ``members`` is
-- split into calls of at most 2,000 (Lua's ``unpack`` stops at a few thousand values).
local function variadic(command, key, members)
    local n = #members
    if n == 0 then return end
    if n <= 2000 then
        redis.call(command, key, unpack(members))
        return
    end
    for first = 1, n, 2000 do
        redis.call(command, key, unpack(members, first, math.min(first + 1999, n)))
    end
end

-- HMGET of many fields, split as ``variadic`` splits: the values in the fields' order
-- (false for a field not there).
local function hmget(key, fields)
    local n = #fields
    if n <= 2000 then return redis.call('HMGET', key, unpack(fields)) end
    local values = {}
    for first = 1, n, 2000 do
        local part = redis.call('HMGET', key, unpack(fields, first, math.min(first + 1999, n)))
        for _, value in ipairs(part) do values[#values + 1] = value end
    end
    return values
end

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A record: "priority|timeout|due|key length|" then the key and the body; a message with
-- a fair-share key has "f<length>|<fair key>" before that, and one with a concurrency
-- limit "c<length>|<limit key>" before the numbers (after any fair-share key). parse
-- returns (priority, timeout, due, key or false, body, fair key or false, limit key or
-- false). A record that is not one (written below tickwork, or damaged) reads as a
-- keyless message due long ago whose body is the whole record: a claim hands it out and
-- the worker poisons it as undecodable, instead of every claim of the shard failing on it.
local function parse(record)
    local fair, limit, rest = false, false, record
    local fl, fs = string.match(record, '^f(%d+)|()')
    if fl then
        fair = string.sub(record, fs, fs + tonumber(fl) - 1)
        rest = string.sub(record, fs + tonumber(fl))
    end
    local cl, cs = string.match(rest, '^c(%d+)|()')
    if cl then
        limit = string.sub(rest, cs, cs + tonumber(cl) - 1)
        rest = string.sub(rest, cs + tonumber(cl))
    end
    local p, t, d, kl, start = string.match(rest, '^(-?%d+)|(%d+)|(-?%d+)|(%d+)|()')
    if not p then return 0, 60000, 0, false, record, false, false end  -- a 60 s lease
    kl = tonumber(kl)
    local key = false
    if kl > 0 then key = string.sub(rest, start, start + kl - 1) end
    return tonumber(p), tonumber(t), tonumber(d), key, string.sub(rest, start + kl), fair, limit
end

local function make_record(priority, timeout, due, key, body, fair, limit)
    local k = key or ''
    local record = priority .. '|' .. timeout .. '|' .. due .. '|' .. #k .. '|' .. k .. body
    if limit then record = 'c' .. #limit .. '|' .. limit .. record end
    if fair then return 'f' .. #fair .. '|' .. fair .. record end
    return record
end

local PRIORITY_STEP = 4398046511104  -- 2^42: a ready score is priority, then due or turn

local function ready_score(priority, due)
    return (1023 - priority) * PRIORITY_STEP + due
end

-- Priority aging (a task's ``max_wait``): a priority argument is "<priority>", or
-- "<priority>w<promotion time>" for a message promoted to PROMOTED (ahead of every
-- priority a task may have) if it is still ready then; W holds those times until a claim
-- reaches them (``promote_aged`` in claim.lua).
local PROMOTED = 1001

local function priority_of(given)
    local p = tonumber(given)
    if p then return p, false end
    local q, w = string.match(given, '^(-?%d+)w(%d+)$')
    return tonumber(q), tonumber(w)
end

local function age(id, promote)
    if promote then redis.call('ZADD', W, promote, id) end
end

-- A message with a fair-share key is always placed as scheduled: the claim that finds it
-- due gives it its turn (``fair_line``) as it becomes ready.
local function place(id, priority, due, now, fair)
    if due <= now and not fair then
        redis.call('ZADD', R, ready_score(priority, due), id)
    else
        redis.call('ZADD', S, due, id)
    end
end

-- Fair share (start-time fair queueing): a ready message with a fair-share key takes
-- the turn after its key's last one, and never one before the turn served last (C's
-- 'fair_vt'); with no fair message ready ('fair_ready' in C is 0) earlier turns no longer
-- count, and the line starts again at the message's due time. F keeps the last turn of
-- each key that may still be ahead of the line (the others are pruned as turns pass).
-- A key of weight w (C's 'fair_w|KEY', set by an operator; 1 when absent) takes w
-- messages per turn: its F score carries, in 1024ths after the turn, how many hold it.
-- A script reads that state once (``fair_line``), hands out turns, then saves it.
local function fair_line()
    local line = {}
    local loaded, waiting, vt, last, shared, weights, changed = false, 0, 0, {}, {}, {}, {}
    local weighted = false  -- whether any key of the shard has a weight ('fair_weighted')
    local function weight_of(fair)
        if not weighted then return 1 end
        local w = weights[fair]
        if w == nil then
            w = tonumber(redis.call('HGET', C, 'fair_w|' .. fair) or '1')
            weights[fair] = w
        end
        return w
    end
    function line.take(fair, due)
        if not loaded then
            loaded = true
            waiting = tonumber(redis.call('HGET', C, 'fair_ready') or '0')
            vt = tonumber(redis.call('HGET', C, 'fair_vt') or '0')
            weighted = redis.call('HEXISTS', C, 'fair_weighted') == 1
        end
        local turn, holding = due, 1
        if waiting > 0 then
            turn = vt
            local previous = last[fair]
            if previous == nil then
                local score = tonumber(redis.call('ZSCORE', F, fair) or false) or false
                if score then
                    previous = math.floor(score)
                    shared[fair] = math.floor((score - previous) * 1024 + 0.5)
                end
                last[fair] = previous
            end
            if previous and previous >= turn then
                local w = weight_of(fair)
                if w > 1 and (shared[fair] or 0) < w then
                    turn, holding = previous, (shared[fair] or 0) + 1
                else
                    turn = previous + 1
                end
            end
        else  -- nothing fair waits: earlier turns no longer count
            redis.call('DEL', F)
            last, shared, changed, vt = {}, {}, {}, due
        end
        last[fair] = turn
        shared[fair] = holding
        changed[fair] = true
        waiting = waiting + 1
        return turn
    end
    function line.save()
        if not loaded then return end
        redis.call('HSET', C, 'fair_ready', waiting, 'fair_vt', vt)
        local members = {}
        for fair in pairs(changed) do
            local score = last[fair]
            if weight_of(fair) > 1 then score = score + shared[fair] / 1024 end
            members[#members + 1] = score; members[#members + 1] = fair
        end
        if #members > 0 then redis.call('ZADD', F, unpack(members)) end
    end
    return line
end

local function insert(id, key, priority, due, timeout, body, now, fair, limit)
    redis.call('HSET', M, id, make_record(priority, timeout, due, key, body, fair, limit))
    place(id, priority, due, now, fair)
    if key then redis.call('HSET', K, key, id) end
    redis.call('HINCRBY', C, 'enqueued', 1)
end

-- Remove every trace of a message; returns its record (or false).
local function remove(id)
    local record = redis.call('HGET', M, id)
    if not record then return false end
    local _, _, _, key, _, fair = parse(record)
    redis.call('HDEL', M, id)
    redis.call('ZREM', S, id)
    if redis.call('ZREM', R, id) == 1 and fair then redis.call('HINCRBY', C, 'fair_ready', -1) end
    redis.call('ZREM', L, id)
    redis.call('HDEL', T, id)
    redis.call('HDEL', A, id)
    redis.call('HDEL', E, id)
    if key and redis.call('HGET', K, key) == id then redis.call('HDEL', K, key) end
    return record
end

local function holds(id, token)
    return redis.call('HGET', T, id) == token
end
