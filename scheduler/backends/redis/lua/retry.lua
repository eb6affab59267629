-- retry: make a failed, still-leased message due again later, keeping its attempt count,
-- and append its ledger entry.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) E (KEYS[7]) C (KEYS[12])
--            and KEYS[16]: the ledger, when an entry is given
-- ARGV: id, token, due_ms, error, then the ledger entry ('0' for none)
local id, token, due, err = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not holds(id, token) then return 0 end
local now = now_ms()
local priority, timeout, _, key, body, fair, limit = parse(redis.call('HGET', M, id))
redis.call('ZREM', L, id)
redis.call('HDEL', T, id)
redis.call('HSET', M, id, make_record(priority, timeout, due, key, body, fair, limit))
place(id, priority, due, now, fair)
redis.call('HSET', E, id, err)
redis.call('HINCRBY', C, 'retried', 1)
ledger(5, KEYS[16], true, now)
return 1
