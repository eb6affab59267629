-- rate_reserve: reserve one start of a rate limit for each request: now when its units
-- fit under `count` with the units of the last period, else a period after the unit
-- `count - units + 1` places back (units are reserved in time order, so that one is the
-- (count - units + 1)-th highest score). A start of several units is its member and the
-- members `member+2` and on, at one time. A member that has a reservation already gets
-- it back (a message coming back at its time). A request that may not reserve (a
-- throttle that drops) and cannot start now is not recorded.
-- Units older than the period are trimmed only when the log holds enough to matter, so
-- a start under the rate costs three calls.
-- KEYS: per request, its limit's starts ZSET (member -> start time, ms); on a cluster a
-- call carries the requests of one limit only (one hash tag).
-- ARGV: per request (member, count, period_ms, units, reserve 1 or 0), in KEYS order.
-- Returns per request -1 when it may start now, else the time of its reservation (or,
-- not reserving, the time it would have had).
local now = now_ms()
local out = {}
for i = 1, #KEYS do
    local log = KEYS[i]
    local member, count = ARGV[5 * i - 4], tonumber(ARGV[5 * i - 3])
    local period, units = tonumber(ARGV[5 * i - 2]), tonumber(ARGV[5 * i - 1])
    local reserve = ARGV[5 * i] == '1'
    local room = count - units + 1  -- units already counted that leave no room for these
    local at = now
    local held = redis.call('ZCARD', log)
    if held >= room then
        redis.call('ZREMRANGEBYSCORE', log, '-inf', now - period)
        held = redis.call('ZCARD', log)
    end
    local mine = false
    if held >= room then
        mine = redis.call('ZSCORE', log, member)
        if not mine then
            at = math.max(now, tonumber(redis.call('ZRANGE', log, -room, -room, 'WITHSCORES')[2]) + period)
        end
    end
    if mine then
        at = tonumber(mine)
    elseif at <= now or reserve then  -- else not recorded: the caller drops it
        if redis.call('ZADD', log, 'NX', at, member) == 1 then
            for n = 2, units do
                redis.call('ZADD', log, 'NX', at, member .. '+' .. n)
            end
            redis.call('PEXPIRE', log, at - now + period)
        else
            at = tonumber(redis.call('ZSCORE', log, member))  -- reserved before, under the rate
        end
    end
    if at <= now then
        out[i] = -1
    else
        out[i] = at
    end
end
return out
