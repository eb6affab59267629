-- batch_settle: record each member's outcome once and count it in the same step.
-- KEYS[1] the batch HASH {prefix:batch:ID} (fields d: description, f: failed members).
-- KEYS[2] its outcomes HASH {prefix:batch:ID}:o (member index -> outcome record): the
--         members that settled, so HLEN is the settled count.
-- ARGV: expires_at (epoch ms, server clock), then per member (index, failed 0|1, outcome).
-- Returns per member {settled, failed} of its batch right after it was recorded. A member
-- recorded before keeps its first outcome and adds nothing (a redelivered run).
local out = {}
for i = 1, (#ARGV - 1) / 3 do
    local member, failed, outcome = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
    if redis.call('HSETNX', KEYS[2], member, outcome) == 1 and failed == '1' then
        redis.call('HINCRBY', KEYS[1], 'f', 1)
    end
    out[i] = {redis.call('HLEN', KEYS[2]), tonumber(redis.call('HGET', KEYS[1], 'f') or '0')}
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[1])
return out
