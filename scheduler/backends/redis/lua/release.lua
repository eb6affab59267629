-- release: give back leases that never started, attempt not counted: due again at once,
-- or at a given time (which becomes the message's due time).
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6])
-- ARGV: count, due_ms (-1: the message's own due time), then count x (id, token)
local due_at = tonumber(ARGV[2])
local now = now_ms()
local released = 0
for i = 1, tonumber(ARGV[1]) do
    local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
    if holds(id, token) then
        local priority, timeout, due, key, body, fair, limit = parse(redis.call('HGET', M, id))
        redis.call('ZREM', L, id)
        redis.call('HDEL', T, id)
        if redis.call('HINCRBY', A, id, -1) <= 0 then redis.call('HDEL', A, id) end
        if due_at >= 0 then
            due = due_at
            redis.call('HSET', M, id, make_record(priority, timeout, due, key, body, fair, limit))
            place(id, priority, due, now, fair)
        elseif fair then  -- waits for a new turn
            redis.call('ZADD', S, due, id)
        else
            redis.call('ZADD', R, ready_score(priority, due), id)
        end
        released = released + 1
    end
end
return released
