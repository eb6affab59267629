-- delete: remove a message wherever it is.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8])
-- ARGV: id
if remove(ARGV[1]) then return 1 end
return 0
