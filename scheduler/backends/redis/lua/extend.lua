-- extend: push lease deadlines (heartbeat), for leases still held.
-- KEYS used: L (KEYS[4]) T (KEYS[5])
-- ARGV: lease_ms, count, then count x (id, token)
local deadline = now_ms() + tonumber(ARGV[1])
local out = {}
for i = 1, tonumber(ARGV[2]) do
    local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
    if holds(id, token) then
        redis.call('ZADD', L, 'XX', deadline, id)
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
