-- wake: make messages that wait for a concurrency slot due now (not leased ones).
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) T (KEYS[5])
-- ARGV: count, then count x id. Returns one 1 (woken) or 0 (gone or running) per id.
local now = now_ms()
local out = {}
for i = 1, tonumber(ARGV[1]) do
    local id = ARGV[1 + i]
    local record = redis.call('HGET', M, id)
    out[i] = 0
    if record and redis.call('HEXISTS', T, id) == 0 then
        local priority, timeout, due, key, body, fair, limit = parse(record)
        if due > now then
            due = now
            redis.call('HSET', M, id, make_record(priority, timeout, due, key, body, fair, limit))
        end
        redis.call('ZREM', S, id)
        place(id, priority, due, now, fair)
        out[i] = 1
    end
end
return out
