-- The due time of the shard's longest-waiting ready message (a read: it writes nothing).
-- A ready score is the priority's band, then the due time (``ready_score``), so within
-- each band present the first member holding a due time is that band's oldest; the
-- answer is the earliest of those. A fair-share message's score holds its turn instead
-- (a small number, far below any due time in milliseconds), so it is passed over: its
-- age is not known here.
-- KEYS: the shard's keys (R). ARGV: none. Returns the due time, or nil (none known).
local DUE_FLOOR = 100000000000  -- 1973-03-03 in milliseconds: turns are far below it
local best = false
local floor = 0
while true do
    local first = redis.call('ZRANGE', R, floor, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if #first == 0 then break end
    local band = math.floor(tonumber(first[2]) / PRIORITY_STEP) * PRIORITY_STEP
    local timed = redis.call(
        'ZRANGE', R, band + DUE_FLOOR, '(' .. string.format('%d', band + PRIORITY_STEP), 'BYSCORE',
        'LIMIT', 0, 1, 'WITHSCORES')
    if #timed > 0 then
        local due = tonumber(timed[2]) - band
        if not best or due < best then best = due end
    end
    floor = band + PRIORITY_STEP
end
return best
