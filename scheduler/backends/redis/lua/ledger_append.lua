-- ledger_append: append records to one ledger (control actions: a cancel, a resume).
-- KEYS: the ledger list (S:h:{subject}, in one shard's hash tag)
-- ARGV: the ledger entry (see ``ledger`` in the prelude)
ledger(1, KEYS[1], true, now_ms())
return 1
