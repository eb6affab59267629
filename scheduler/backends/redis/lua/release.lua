-- release: give back leases that never started: due at once, attempt not counted.
-- KEYS used: M (KEYS[1]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6])
-- ARGV: count, then count x (id, token)
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
