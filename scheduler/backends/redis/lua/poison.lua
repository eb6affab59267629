-- poison: move a leased message to the poison store, with its chain's next occurrence.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8]) PM (KEYS[9]) PF (KEYS[10]) PZ (KEYS[11]) C (KEYS[12]) W (KEYS[15])
--            and KEYS[16]: the ledger, when an entry is given
-- ARGV: id, token, failure JSON (without attempts/time), next as in ACK (8 fields), then
--       the ledger entry ('0' for none)
local id, token, failure = ARGV[1], ARGV[2], ARGV[3]
if not holds(id, token) then return 0 end
local now = now_ms()
local attempts = tonumber(redis.call('HGET', A, id) or '0')
local record = remove(id)
redis.call('HSET', PM, id, record)
redis.call('HSET', PF, id, attempts .. '|' .. now .. '|' .. failure)
redis.call('ZADD', PZ, now, id)
redis.call('HINCRBY', C, 'poisoned', 1)
local next_id = ARGV[4]
if next_id ~= '' and redis.call('HEXISTS', M, next_id) == 0 then
    local key = ARGV[5]
    if key == '' then key = false end
    local fair = ARGV[9]
    if fair == '' then fair = false end
    local limit = ARGV[11]
    if limit == '' then limit = false end
    local priority, promote = priority_of(ARGV[6])
    insert(next_id, key, priority, tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[10], now,
           fair, limit)
    age(next_id, promote)
end
ledger(12, KEYS[16], true, now)
return 1
