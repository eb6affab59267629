-- ack: delete acked messages and insert each next occurrence, fenced by the lease token,
-- and append each one's ledger entry.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8]) C (KEYS[12])
--            and KEYS[15...]: the ledger of each item with an entry, in item order
-- ARGV: count, then per item: id, token, has_next ('0' | '1') and, when '1', the next
--       occurrence's id, key, priority, due_ms, timeout_ms, fair key ('' for none), body,
--       limit key ('' for none);
--       then its ledger entry
--       (see ``ledger`` in the prelude; '0' for none)
local count = tonumber(ARGV[1])
local now = now_ms()
local out, acked, at, lk = {}, 0, 2, 14
for i = 1, count do
    local id, token, has_next = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    local nxt = at + 3
    at = at + 3
    if has_next == '1' then at = at + 8 end
    local held = holds(id, token)
    if ARGV[at] ~= '0' then lk = lk + 1 end
    at = ledger(at, KEYS[lk], held, now)
    if held then
        remove(id)
        acked = acked + 1
        out[i] = 1
        if has_next == '1' and redis.call('HEXISTS', M, ARGV[nxt]) == 0 then
            local key = ARGV[nxt + 1]
            if key == '' then key = false end
            local fair = ARGV[nxt + 5]
            if fair == '' then fair = false end
            local limit = ARGV[nxt + 7]
            if limit == '' then limit = false end
            insert(ARGV[nxt], key, tonumber(ARGV[nxt + 2]), tonumber(ARGV[nxt + 3]),
                   tonumber(ARGV[nxt + 4]), ARGV[nxt + 6], now, fair, limit)
        end
    else
        out[i] = 0
    end
end
if acked > 0 then redis.call('HINCRBY', C, 'acked', acked) end
return out
