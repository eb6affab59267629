-- delete_by_key: cancel the chain holding a key.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8])
-- ARGV: key
local id = redis.call('HGET', K, ARGV[1])
if id and remove(id) then return 1 end
return 0
