-- poison_replay: move poisoned messages back to ready with a fresh attempt count.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) K (KEYS[8]) PM (KEYS[9]) PF (KEYS[10]) PZ (KEYS[11]) C (KEYS[12])
-- ARGV: 'all' | 'ids', then ids
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
        local priority, timeout, _, key, body, fair, limit = parse(record)
        local free = redis.call('HEXISTS', M, id) == 0
        if key and redis.call('HEXISTS', K, key) == 1 then free = false end
        if free then
            insert(id, key, priority, now, timeout, body, now, fair, limit)
            redis.call('HINCRBY', C, 'enqueued', -1)
            redis.call('HDEL', PM, id)
            redis.call('HDEL', PF, id)
            redis.call('ZREM', PZ, id)
            moved = moved + 1
        end
    end
end
return moved
