-- slot_acquire: take (or renew) one slot of a concurrency limit.
-- KEYS: the limit's holders ZSET (holder id -> lease end, ms); no shard keys.
-- ARGV: holder, capacity, lease_ms. Returns -1 when granted, else the earliest lease end.
local H = KEYS[1]
local holder, capacity, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', H, '-inf', now)
if redis.call('ZSCORE', H, holder) or redis.call('ZCARD', H) < capacity then
    redis.call('ZADD', H, now + lease, holder)
    return -1
end
return tonumber(redis.call('ZRANGE', H, 0, 0, 'WITHSCORES')[2])
