-- rate_reserve: reserve one start of a rate limit for each request: now when fewer than
-- `count` starts fall in the last period, else a period after the count-th last start
-- (starts are reserved in time order, so that one is the count-th highest score). A
-- member that has a reservation already gets it back (a message coming back at its time).
-- KEYS: per request, its limit's starts ZSET (member -> start time, ms); on a cluster a
-- call carries the requests of one limit only (one hash tag).
-- ARGV: per request (member, count, period_ms), in KEYS order.
-- Returns per request -1 when it may start now, else the time of its reservation.
local now = now_ms()
local out = {}
for i = 1, #KEYS do
    local log = KEYS[i]
    local member, count = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1])
    local period = tonumber(ARGV[3 * i])
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - period)
    local at = redis.call('ZSCORE', log, member)
    if at then
        at = tonumber(at)
    else
        at = now
        local last = redis.call('ZRANGE', log, -count, -count, 'WITHSCORES')[2]
        if last then
            at = math.max(now, tonumber(last) + period)
        end
        redis.call('ZADD', log, at, member)
        redis.call('PEXPIRE', log, at - now + period)
    end
    if at <= now then
        out[i] = -1
    else
        out[i] = at
    end
end
return out
