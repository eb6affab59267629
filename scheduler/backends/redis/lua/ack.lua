-- ack: delete acked messages and insert each next occurrence, fenced by the lease token,
-- and append each one's ledger entry.
-- KEYS used: M (KEYS[1]) S (KEYS[2]) R (KEYS[3]) L (KEYS[4]) T (KEYS[5]) A (KEYS[6]) E (KEYS[7]) K (KEYS[8]) C (KEYS[12])
--            W (KEYS[15]) and KEYS[16...]: the ledger of each item with an entry, in item order
-- ARGV: count, then per item: id, token, keyed ('0' | '1'), has_next ('0' | '1') and,
--       when '1', the next occurrence's id, key, priority, due_ms, timeout_ms, fair key
--       ('' for none), body, limit key ('' for none);
--       then its ledger entry
--       (see ``ledger`` in the prelude; '0' for none)
-- The tokens of the whole batch are read in one HMGET. A held message without a key or a
-- next occurrence (a plain one-off) is leased, so it is in M, L, T, A and maybe E and
-- nowhere else: those are deleted for all such messages together, one command per key
-- (``variadic``); the others go through ``remove`` and ``insert`` in item order.
local count = tonumber(ARGV[1])
local items, ids, at = {}, {}, 2
for i = 1, count do
    local item = {id = ARGV[at], token = ARGV[at + 1], keyed = ARGV[at + 2] == '1',
                  next_at = false}
    if ARGV[at + 3] == '1' then item.next_at = at + 4; at = at + 12 else at = at + 4 end
    item.ledger_at = at
    local n = string.match(ARGV[at], '^(%d+)|')
    at = at + 1 + (tonumber(n) or 0)
    items[i], ids[i] = item, item.id
end
local held = {}
if count > 0 then held = hmget(T, ids) end
local now = false  -- the server's time, read once and only when something needs it
local plain = {}  -- held plain one-offs whose deletion is still to be written
local function delete_plain()
    if #plain == 0 then return end
    variadic('HDEL', M, plain)
    variadic('ZREM', L, plain)
    variadic('HDEL', T, plain)
    variadic('HDEL', A, plain)
    variadic('HDEL', E, plain)
    plain = {}
end
local out, acked, lk, seen = {}, 0, 15, {}
for i, item in ipairs(items) do
    local holds_it = held[i] == item.token and not seen[item.id]  -- an id twice: once
    seen[item.id] = true
    if ARGV[item.ledger_at] ~= '0' then
        lk = lk + 1
        if holds_it and not now then now = now_ms() end
    end
    ledger(item.ledger_at, KEYS[lk], holds_it, now)
    if not holds_it then
        out[i] = 0
    elseif not item.keyed and not item.next_at then
        plain[#plain + 1] = item.id
        acked = acked + 1
        out[i] = 1
    else
        delete_plain()  -- in item order: a next occurrence may be one of the batch
        remove(item.id)
        acked = acked + 1
        out[i] = 1
        local nxt = item.next_at
        if nxt and redis.call('HEXISTS', M, ARGV[nxt]) == 0 then
            if not now then now = now_ms() end
            local key = ARGV[nxt + 1]
            if key == '' then key = false end
            local fair = ARGV[nxt + 5]
            if fair == '' then fair = false end
            local limit = ARGV[nxt + 7]
            if limit == '' then limit = false end
            local priority, promote = priority_of(ARGV[nxt + 2])
            insert(ARGV[nxt], key, priority, tonumber(ARGV[nxt + 3]),
                   tonumber(ARGV[nxt + 4]), ARGV[nxt + 6], now, fair, limit)
            age(ARGV[nxt], promote)
        end
    end
end
delete_plain()
if acked > 0 then redis.call('HINCRBY', C, 'acked', acked) end
return out
