-- poison_delete: delete the named poisoned messages of one shard; returns how many.
-- KEYS used: PM (KEYS[9]) PF (KEYS[10]) PZ (KEYS[11])
-- ARGV: ids
local deleted = 0
for _, id in ipairs(ARGV) do
    if redis.call('ZREM', PZ, id) == 1 then
        redis.call('HDEL', PM, id)
        redis.call('HDEL', PF, id)
        deleted = deleted + 1
    end
end
return deleted
