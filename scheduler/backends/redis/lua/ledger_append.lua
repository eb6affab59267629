-- ledger_append: append records to ledgers of one shard (control actions: a cancel, a
-- resume, runs skipped in a pause).
-- KEYS: the ledger lists (S:h:{subject}, in one shard's hash tag), one per entry
-- ARGV: the entries in KEYS' order (each as ``ledger`` in the prelude reads it)
local now, at = now_ms(), 1
for i = 1, #KEYS do
    at = ledger(at, KEYS[i], true, now)
end
return 1
