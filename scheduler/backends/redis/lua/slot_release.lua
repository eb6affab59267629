-- slot_release: give back slots of one concurrency limit; for each one that was held,
-- take the longest waiter off the line and return it (the caller wakes them).
-- KEYS: the limit's holders ZSET, waiters ZSET. ARGV: holder ids.
local H, W = KEYS[1], KEYS[2]
local out = {}
for i = 1, #ARGV do
    if redis.call('ZREM', H, ARGV[i]) == 1 then
        local first = redis.call('ZPOPMIN', W)
        if #first > 0 then out[#out + 1] = first[1] end
    end
end
return out
