-- slot_extend: push the lease of held slots of one concurrency limit to now + lease_ms.
-- KEYS: the limit's holders ZSET. ARGV: lease_ms, then holder ids.
local H = KEYS[1]
local until_ms = now_ms() + tonumber(ARGV[1])
for i = 2, #ARGV do
    redis.call('ZADD', H, 'XX', until_ms, ARGV[i])
end
return 0
