-- slot_wait: join a concurrency limit's waiters (once; first come, first served).
-- KEYS: the limit's holders ZSET, waiters ZSET (member -> place in line), line counter.
-- ARGV: member, capacity. Returns 1 when a slot is free now (the caller wakes itself).
local H, W, Q = KEYS[1], KEYS[2], KEYS[3]
local member, capacity = ARGV[1], tonumber(ARGV[2])
if not redis.call('ZSCORE', W, member) then
    redis.call('ZADD', W, redis.call('INCR', Q), member)
end
redis.call('ZREMRANGEBYSCORE', H, '-inf', now_ms())
if redis.call('ZCARD', H) < capacity then return 1 end
return 0
