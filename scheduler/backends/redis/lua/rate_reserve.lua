-- rate_reserve: reserve one start of a rate limit for each request: now when fewer than
-- `count` starts fall in the last period, else a period after the count-th last start
-- (starts are reserved in time order, so that one is the count-th highest score). A
-- member that has a reservation already gets it back (a message coming back at its time).
-- Starts older than the period are trimmed only when the log holds `count` or more, so
-- a start under the rate costs three calls.
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
    local at = now
    local held = redis.call('ZCARD', log)
    if held >= count then
        redis.call('ZREMRANGEBYSCORE', log, '-inf', now - period)
        held = redis.call('ZCARD', log)
    end
    local mine = false
    if held >= count then
        mine = redis.call('ZSCORE', log, member)
        if not mine then
            at = math.max(now, tonumber(redis.call('ZRANGE', log, -count, -count, 'WITHSCORES')[2]) + period)
        end
    end
    if mine then
        at = tonumber(mine)
    elseif redis.call('ZADD', log, 'NX', at, member) == 1 then
        redis.call('PEXPIRE', log, at - now + period)
    else
        at = tonumber(redis.call('ZSCORE', log, member))  -- reserved before, under the rate
    end
    if at <= now then
        out[i] = -1
    else
        out[i] = at
    end
end
return out
