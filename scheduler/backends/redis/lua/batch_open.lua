-- batch_open: store a batch's description, kept until the batch expires.
-- KEYS[1] the batch HASH {prefix:batch:ID} (fields d: description, f: failed members).
-- KEYS[2] its outcomes HASH {prefix:batch:ID}:o (member index -> outcome record).
-- ARGV: description, expires_at (epoch ms, server clock).
redis.call('HSET', KEYS[1], 'd', ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
