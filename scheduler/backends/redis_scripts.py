"""The Redis backend's Lua scripts: every state change of a shard is one of these.

Each script touches the keys of one shard only (they share a hash tag, so in Redis Cluster
they live in one slot) and reads the time from the server (``TIME``), so worker clocks
never decide when something is due or when a lease ends.

Keys of shard ``S`` = ``{prefix}:{queue}:{n}``, passed in this order to every script::

    KEYS[1]  S:m   HASH  id -> record: "priority|timeout_ms|due_ms|len(key)|" key body
    KEYS[2]  S:s   ZSET  scheduled: id -> due_ms (not yet due)
    KEYS[3]  S:r   ZSET  ready: id -> (1023 - priority) * 2^42 + due_ms
    KEYS[4]  S:l   ZSET  leased: id -> lease deadline (ms)
    KEYS[5]  S:t   HASH  id -> lease token (leased messages only)
    KEYS[6]  S:a   HASH  id -> attempts so far (absent = 0)
    KEYS[7]  S:e   HASH  id -> last error (retried messages only)
    KEYS[8]  S:k   HASH  key -> id
    KEYS[9]  S:pm  HASH  poisoned id -> record (as in S:m)
    KEYS[10] S:pf  HASH  poisoned id -> failure JSON
    KEYS[11] S:pz  ZSET  poisoned id -> failed at (ms)
    KEYS[12] S:c   HASH  counters
"""

from __future__ import annotations

SHARD_KEYS = ("m", "s", "r", "l", "t", "a", "e", "k", "pm", "pf", "pz", "c")

PRELUDE = r"""
local M, S, R, L, T, A, E, K, PM, PF, PZ, C =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8],
    KEYS[9], KEYS[10], KEYS[11], KEYS[12]

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse(record)
    local p, t, d, kl, start = string.match(record, '^(-?%d+)|(%d+)|(-?%d+)|(%d+)|()')
    kl = tonumber(kl)
    local key = false
    if kl > 0 then key = string.sub(record, start, start + kl - 1) end
    return tonumber(p), tonumber(t), tonumber(d), key, string.sub(record, start + kl)
end

local function make_record(priority, timeout, due, key, body)
    local k = key or ''
    return priority .. '|' .. timeout .. '|' .. due .. '|' .. #k .. '|' .. k .. body
end

local function ready_score(priority, due)
    return (1023 - priority) * 4398046511104 + due
end

local function place(id, priority, due, now)
    if due <= now then
        redis.call('ZADD', R, ready_score(priority, due), id)
    else
        redis.call('ZADD', S, due, id)
    end
end

local function insert(id, key, priority, due, timeout, body, now)
    redis.call('HSET', M, id, make_record(priority, timeout, due, key, body))
    place(id, priority, due, now)
    if key then redis.call('HSET', K, key, id) end
    redis.call('HINCRBY', C, 'enqueued', 1)
end

-- Remove every trace of a message; returns its record (or false).
local function remove(id)
    local record = redis.call('HGET', M, id)
    if not record then return false end
    local _, _, _, key = parse(record)
    redis.call('HDEL', M, id)
    redis.call('ZREM', S, id)
    redis.call('ZREM', R, id)
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
"""

# ARGV: mode, count, then count x (id, key, priority, due_ms, record)
# (the client builds each record; unkeyed fresh messages take a fast path: HSETNX, and one
# ZADD per thousand messages)
ENQUEUE = (
    PRELUDE
    + r"""
local mode, count = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local function arg(i, f) return ARGV[2 + (i - 1) * 5 + f] end
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
local function queue_up(id, priority, due)
    if due <= now then
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
    local priority, due = tonumber(arg(i, 3)), tonumber(arg(i, 4))
    if key == '' then
        if mode ~= 'replace' then
            if redis.call('HSETNX', M, id, record) == 1 then
                queue_up(id, priority, due)
                out[i] = 'enqueued'
            else
                out[i] = 'duplicate'
            end
        else
            flush(true)
            out[i] = remove(id) and 'replaced' or 'enqueued'
            redis.call('HSET', M, id, record)
            queue_up(id, priority, due)
        end
    else
        flush(true)
        local holder = redis.call('HGET', K, key)
        if holder and same(holder, i) and mode ~= 'replace' then
            out[i] = 'duplicate'
        elseif holder and mode == 'ignore' then
            out[i] = 'ignored'
        else
            if holder then remove(holder); out[i] = 'replaced' else out[i] = 'enqueued' end
            if redis.call('HEXISTS', M, id) == 1 then remove(id) end
            redis.call('HSET', M, id, record)
            redis.call('HSET', K, key, id)
            queue_up(id, priority, due)
        end
    end
end
flush(true)
if added > 0 then redis.call('HINCRBY', C, 'enqueued', added) end
return out
"""
)

# ARGV: limit, lookahead_ms, token, sweep_max
CLAIM = (
    PRELUDE
    + r"""
local limit, lookahead = tonumber(ARGV[1]), tonumber(ARGV[2])
local token, sweep = ARGV[3], tonumber(ARGV[4])
local now = now_ms()
-- leases that ran out are due again (their attempt was counted when claimed)
local expired = redis.call('ZRANGEBYSCORE', L, '-inf', now, 'LIMIT', 0, sweep)
for _, id in ipairs(expired) do
    redis.call('ZREM', L, id)
    redis.call('HDEL', T, id)
    local record = redis.call('HGET', M, id)
    if record then
        local priority, _, due = parse(record)
        redis.call('ZADD', R, ready_score(priority, due), id)
    end
end
if #expired > 0 then redis.call('HINCRBY', C, 'redelivered', #expired) end
-- scheduled messages due by now + lookahead become ready, ordered by priority
local due_now = redis.call('ZRANGEBYSCORE', S, '-inf', now + lookahead, 'LIMIT', 0, sweep)
for _, id in ipairs(due_now) do
    redis.call('ZREM', S, id)
    local record = redis.call('HGET', M, id)
    if record then
        local priority, _, due = parse(record)
        redis.call('ZADD', R, ready_score(priority, due), id)
    end
end
local out = {now, -1}
if limit > 0 then
    local popped = redis.call('ZPOPMIN', R, limit)
    local claimed = 0
    for i = 1, #popped, 2 do
        local id = popped[i]
        local record = redis.call('HGET', M, id)
        if record then
            local priority, timeout, due, key, body = parse(record)
            local attempt = redis.call('HINCRBY', A, id, 1)
            local deadline = math.max(now, due) + timeout
            redis.call('ZADD', L, deadline, id)
            redis.call('HSET', T, id, token)
            out[#out + 1] = id
            out[#out + 1] = key or ''
            out[#out + 1] = body
            out[#out + 1] = attempt
            out[#out + 1] = due
            out[#out + 1] = deadline
            out[#out + 1] = timeout
            out[#out + 1] = priority
            claimed = claimed + 1
        end
    end
    if claimed > 0 then redis.call('HINCRBY', C, 'claimed', claimed) end
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
"""
)

# ARGV: count, then per item: id, token, has_next ('0' | '1') and, when '1', the next
#       occurrence's id, key, priority, due_ms, timeout_ms, body
ACK = (
    PRELUDE
    + r"""
local count = tonumber(ARGV[1])
local now = now_ms()
local out, acked, at = {}, 0, 2
for i = 1, count do
    local id, token, has_next = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    local nxt = at + 3
    at = at + 3
    if has_next == '1' then at = at + 6 end
    if holds(id, token) then
        remove(id)
        acked = acked + 1
        out[i] = 1
        if has_next == '1' and redis.call('HEXISTS', M, ARGV[nxt]) == 0 then
            local key = ARGV[nxt + 1]
            if key == '' then key = false end
            insert(ARGV[nxt], key, tonumber(ARGV[nxt + 2]), tonumber(ARGV[nxt + 3]),
                   tonumber(ARGV[nxt + 4]), ARGV[nxt + 5], now)
        end
    else
        out[i] = 0
    end
end
if acked > 0 then redis.call('HINCRBY', C, 'acked', acked) end
return out
"""
)

# ARGV: id, token, due_ms, error
RETRY = (
    PRELUDE
    + r"""
local id, token, due, err = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not holds(id, token) then return 0 end
local priority, timeout, _, key, body = parse(redis.call('HGET', M, id))
redis.call('ZREM', L, id)
redis.call('HDEL', T, id)
redis.call('HSET', M, id, make_record(priority, timeout, due, key, body))
place(id, priority, due, now_ms())
redis.call('HSET', E, id, err)
redis.call('HINCRBY', C, 'retried', 1)
return 1
"""
)

# ARGV: count, then count x (id, token)
RELEASE = (
    PRELUDE
    + r"""
local released = 0
for i = 1, tonumber(ARGV[1]) do
    local id, token = ARGV[2 * i], ARGV[2 * i + 1]
    if holds(id, token) then
        local priority, _, due = parse(redis.call('HGET', M, id))
        redis.call('ZREM', L, id)
        redis.call('HDEL', T, id)
        if redis.call('HINCRBY', A, id, -1) <= 0 then redis.call('HDEL', A, id) end
        redis.call('ZADD', R, ready_score(priority, due), id)
        released = released + 1
    end
end
return released
"""
)

# ARGV: lease_ms, count, then count x (id, token)
EXTEND = (
    PRELUDE
    + r"""
local deadline = now_ms() + tonumber(ARGV[1])
local out = {}
for i = 1, tonumber(ARGV[2]) do
    local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
    if holds(id, token) then
        redis.call('ZADD', L, 'XX', deadline, id)
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
"""
)

# ARGV: id, token, failure JSON (without attempts/time), next as in ACK (6 fields)
POISON = (
    PRELUDE
    + r"""
local id, token, failure = ARGV[1], ARGV[2], ARGV[3]
if not holds(id, token) then return 0 end
local now = now_ms()
local attempts = tonumber(redis.call('HGET', A, id) or '0')
local record = remove(id)
redis.call('HSET', PM, id, record)
redis.call('HSET', PF, id, attempts .. '|' .. now .. '|' .. failure)
redis.call('ZADD', PZ, now, id)
redis.call('HINCRBY', C, 'poisoned', 1)
local next_id = ARGV[4]
if next_id ~= '' and redis.call('HEXISTS', M, next_id) == 0 then
    local key = ARGV[5]
    if key == '' then key = false end
    insert(next_id, key, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9], now)
end
return 1
"""
)

# ARGV: 'all' | 'ids', then ids
POISON_REPLAY = (
    PRELUDE
    + r"""
local ids
if ARGV[1] == 'all' then
    ids = redis.call('ZRANGE', PZ, 0, -1)
else
    ids = {}
    for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local now, moved = now_ms(), 0
for _, id in ipairs(ids) do
    local record = redis.call('HGET', PM, id)
    if record then
        local priority, timeout, _, key, body = parse(record)
        local free = redis.call('HEXISTS', M, id) == 0
        if key and redis.call('HEXISTS', K, key) == 1 then free = false end
        if free then
            insert(id, key, priority, now, timeout, body, now)
            redis.call('HINCRBY', C, 'enqueued', -1)
            redis.call('HDEL', PM, id)
            redis.call('HDEL', PF, id)
            redis.call('ZREM', PZ, id)
            moved = moved + 1
        end
    end
end
return moved
"""
)

# ARGV: id
DELETE = (
    PRELUDE
    + r"""
if remove(ARGV[1]) then return 1 end
return 0
"""
)

# ARGV: key
DELETE_BY_KEY = (
    PRELUDE
    + r"""
local id = redis.call('HGET', K, ARGV[1])
if id and remove(id) then return 1 end
return 0
"""
)

SCRIPTS = {
    "enqueue": ENQUEUE,
    "claim": CLAIM,
    "ack": ACK,
    "retry": RETRY,
    "release": RELEASE,
    "extend": EXTEND,
    "poison": POISON,
    "poison_replay": POISON_REPLAY,
    "delete": DELETE,
    "delete_by_key": DELETE_BY_KEY,
}
