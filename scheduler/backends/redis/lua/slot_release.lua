-- slot_release: give back slots of concurrency limits; for each one that was held, take
-- the longest waiter of its limit off the line. On a cluster, one limit per call.
-- KEYS: per limit, its holders ZSET then its waiters ZSET.
-- ARGV: per limit (in KEYS order), a count then that many holder ids.
-- Returns per limit the list of waiters taken off its line (the caller wakes them).
local out = {}
local at = 1
for i = 1, #KEYS / 2 do
    local holders, waiters = KEYS[2 * i - 1], KEYS[2 * i]
    local count = tonumber(ARGV[at])
    local popped = {}
    for j = 1, count do
        if redis.call('ZREM', holders, ARGV[at + j]) == 1 then
            local first = redis.call('ZPOPMIN', waiters)
            if #first > 0 then popped[#popped + 1] = first[1] end
        end
    end
    at = at + count + 1
    out[i] = popped
end
return out
