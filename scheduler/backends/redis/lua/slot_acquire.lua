-- slot_acquire: take (or renew) one slot of a concurrency limit for each request; a
-- message that gets one leaves its limit's waiting line (if it was in it).
-- KEYS: per request, its limit's holders ZSET (holder id -> lease end, ms) then waiters
-- ZSET; on a cluster a call carries the requests of one limit only (one hash tag).
-- ARGV: per request (holder, capacity, lease_ms, waiter member), in KEYS order.
-- Returns per request -1 when granted, else the earliest lease end of the holders.
local now = now_ms()
local out = {}
for i = 1, #KEYS / 2 do
    local holders, waiters = KEYS[2 * i - 1], KEYS[2 * i]
    local holder, capacity = ARGV[4 * i - 3], tonumber(ARGV[4 * i - 2])
    local lease, member = tonumber(ARGV[4 * i - 1]), ARGV[4 * i]
    local granted = redis.call('ZSCORE', holders, holder) ~= false
    if not granted then
        local held = redis.call('ZCARD', holders)
        if held >= capacity then  -- full: forget holders whose lease ran out, then look
            redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
            held = redis.call('ZCARD', holders)
        end
        granted = held < capacity
    end
    if granted then
        redis.call('ZADD', holders, now + lease, holder)
        redis.call('ZREM', waiters, member)
        out[i] = -1
    else
        out[i] = tonumber(redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')[2])
    end
end
return out
