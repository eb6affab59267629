"""The PostgreSQL backend's schema, created and upgraded by the backend itself.

Every table lives in one PostgreSQL schema of tickwork's own (``tickwork`` unless the URL
says ``?schema=``), so tickwork's tables never mix with the application's. The schema is
versioned: ``MIGRATIONS[n]`` takes it from version ``n`` to ``n + 1``, each applied once,
in order, in one transaction under an advisory lock (two processes starting at once do
not both apply it). ``tickwork postgres install --print`` prints the same SQL for teams
that apply DDL by hand.

SQL here names tables ``tw.<table>``; ``qualify`` replaces ``tw.`` with the schema's
quoted name, so every statement works on any connection, whatever its ``search_path``
(a caller's own connection, for transactional enqueue, has the application's).

Messages: ``at_ms`` is the due time of a waiting message and the lease deadline of a
running one; ``due_ms`` always keeps the due time. States: 0 scheduled (due later),
1 ready (due; claimed by priority, then ``at_ms``, then id: unkeyed ids grow with
time, so messages due at the same moment come out in the order they were made),
2 leased. The partial indexes serve each state's question: what is ready in claim
order, what comes due next, which leases expired. Finished messages are deleted (never
updated to a "done" state), so the table holds only the live ones however many passed
through it; each message leaves two dead row versions (its claim and its delete), so the
table asks autovacuum to come after every 10,000 of them, whatever its size, at full
speed (``docs/operations.md`` has the figures and the server settings to go with it).
"""

from __future__ import annotations

import re
from functools import lru_cache

from tickwork.scheduler.errors import ConfigurationError

DEFAULT_SCHEMA = "tickwork"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_TABLE = re.compile(r"\btw\.")

#: the statements of each version, in order; never edit one that shipped: add another
MIGRATIONS: tuple[str, ...] = (
    """
CREATE TABLE tw.messages (
    id          text PRIMARY KEY,
    queue       text NOT NULL,
    key         text,
    priority    integer NOT NULL,
    state       smallint NOT NULL,
    at_ms       bigint NOT NULL,
    due_ms      bigint NOT NULL,
    timeout_ms  bigint NOT NULL,
    attempt     integer NOT NULL DEFAULT 0,
    token       text,
    last_error  text,
    body        bytea NOT NULL,
    fair        text,
    turn        bigint
);
CREATE UNIQUE INDEX messages_key ON tw.messages (queue, key) WHERE key IS NOT NULL;
CREATE INDEX messages_ready ON tw.messages (queue, priority DESC, at_ms, id) WHERE state = 1;
CREATE INDEX messages_scheduled ON tw.messages (queue, at_ms) WHERE state = 0;
CREATE INDEX messages_leased ON tw.messages (queue, at_ms) WHERE state = 2;
CREATE INDEX messages_fair_ready ON tw.messages (queue, at_ms)
    WHERE state = 1 AND fair IS NOT NULL;
CREATE INDEX messages_fair_scheduled ON tw.messages (queue, at_ms)
    WHERE state = 0 AND fair IS NOT NULL;
ALTER TABLE tw.messages SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0.0,
    autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);
-- a claim in one round trip (``leases.py``): expired leases made ready again, due
-- messages (without a fair-share key) made ready, up to p_limit of the ready leased
-- under p_token, the counters; then one summary row (c_id NULL): c_due the queue's next
-- due time when nothing was leased, c_turn 1 when fair messages are due, in which case
-- nothing is leased here (the caller gives them their turns first, ``fairness.py``).
-- Rows are picked in MATERIALIZED common table expressions: a LIMIT ... SKIP LOCKED
-- subquery in WHERE IN may run twice.
CREATE FUNCTION tw.claim(
    p_queue text, p_limit integer, p_now bigint, p_until bigint, p_token text, p_slot smallint
) RETURNS TABLE (
    c_id text, c_key text, c_body bytea, c_attempt integer, c_due bigint, c_at bigint,
    c_timeout bigint, c_priority integer, c_turn bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_expired integer;
    v_claimed integer := 0;
    v_fair boolean;
BEGIN
    WITH expiring AS MATERIALIZED (
        SELECT m.id FROM tw.messages AS m
        WHERE m.queue = p_queue AND m.state = 2 AND m.at_ms <= p_now
        FOR UPDATE SKIP LOCKED)
    UPDATE tw.messages AS m SET state = 1, at_ms = COALESCE(m.turn, m.due_ms), token = NULL
    FROM expiring WHERE m.id = expiring.id;
    GET DIAGNOSTICS v_expired = ROW_COUNT;
    WITH coming AS MATERIALIZED (
        SELECT m.id FROM tw.messages AS m
        WHERE m.queue = p_queue AND m.state = 0 AND m.at_ms <= p_until AND m.fair IS NULL
        ORDER BY m.at_ms, m.id LIMIT 10000 FOR UPDATE SKIP LOCKED)
    UPDATE tw.messages AS m SET state = 1 FROM coming WHERE m.id = coming.id;
    v_fair := EXISTS (SELECT 1 FROM tw.messages AS m WHERE m.queue = p_queue
        AND m.state = 0 AND m.fair IS NOT NULL AND m.at_ms <= p_until);
    IF NOT v_fair THEN
        RETURN QUERY
        WITH picked AS MATERIALIZED (
            SELECT m.id FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 1
            ORDER BY m.priority DESC, m.at_ms, m.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
        UPDATE tw.messages AS m SET state = 2, token = p_token, attempt = m.attempt + 1,
            at_ms = GREATEST(p_now, m.due_ms) + m.timeout_ms
        FROM picked WHERE m.id = picked.id
        RETURNING m.id, m.key, m.body, m.attempt, m.due_ms, m.at_ms, m.timeout_ms,
            m.priority, m.turn;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
    END IF;
    INSERT INTO tw.counters AS c (queue, name, slot, value)
    SELECT p_queue, n.name, p_slot, n.value
    FROM (VALUES ('claimed', v_claimed), ('redelivered', v_expired)) AS n(name, value)
    WHERE n.value > 0 ORDER BY n.name
    ON CONFLICT (queue, name, slot) DO UPDATE SET value = c.value + excluded.value;
    RETURN QUERY SELECT NULL::text, NULL::text, NULL::bytea, NULL::integer,
        CASE WHEN v_claimed = 0 AND NOT v_fair THEN LEAST(
            (SELECT min(m.at_ms) FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 0),
            (SELECT min(m.at_ms) FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 2))
        END,
        NULL::bigint, NULL::bigint, NULL::integer, v_fair::integer::bigint;
END
$$;
CREATE TABLE tw.fair_turns (
    queue text NOT NULL,
    fair  text NOT NULL,
    last  bigint NOT NULL,
    PRIMARY KEY (queue, fair)
);
CREATE TABLE tw.poison (
    id          text PRIMARY KEY,
    queue       text NOT NULL,
    key         text,
    priority    integer NOT NULL,
    timeout_ms  bigint NOT NULL,
    attempts    integer NOT NULL,
    failed_ms   bigint NOT NULL,
    reason      text NOT NULL,
    error_type  text NOT NULL,
    error       text NOT NULL,
    traceback   text NOT NULL,
    body        bytea NOT NULL
);
CREATE INDEX poison_queue ON tw.poison (queue, failed_ms);
CREATE TABLE tw.counters (
    queue text NOT NULL,
    name  text NOT NULL,
    slot  smallint NOT NULL,
    value bigint NOT NULL,
    PRIMARY KEY (queue, name, slot)
);
CREATE TABLE tw.queue_bounds (
    queue       text PRIMARY KEY,
    max_pending bigint NOT NULL,
    pending     bigint NOT NULL
);
CREATE TABLE tw.paused_queues (
    queue    text PRIMARY KEY,
    since_ms bigint NOT NULL
);
CREATE TABLE tw.abort_requests (
    id             text PRIMARY KEY,
    queue          text NOT NULL,
    continue_chain boolean NOT NULL,
    requested_ms   bigint NOT NULL,
    expires_ms     bigint NOT NULL
);
CREATE TABLE tw.limit_slots (
    name       text NOT NULL,
    holder     text NOT NULL,
    expires_ms bigint NOT NULL,
    PRIMARY KEY (name, holder)
);
CREATE TABLE tw.limit_waiters (
    place      bigserial PRIMARY KEY,
    name       text NOT NULL,
    message_id text NOT NULL,
    queue      text NOT NULL,
    key        text,
    UNIQUE (name, message_id)
);
CREATE INDEX limit_waiters_line ON tw.limit_waiters (name, place);
CREATE TABLE tw.rate_starts (
    name     text NOT NULL,
    member   text NOT NULL,
    at_ms    bigint NOT NULL,
    until_ms bigint NOT NULL,
    PRIMARY KEY (name, member)
);
CREATE INDEX rate_starts_in_order ON tw.rate_starts (name, at_ms);
CREATE INDEX rate_starts_to_prune ON tw.rate_starts (until_ms);
CREATE TABLE tw.results (
    id         text PRIMARY KEY,
    body       bytea NOT NULL,
    expires_ms bigint NOT NULL
);
CREATE INDEX results_to_prune ON tw.results (expires_ms);
CREATE TABLE tw.workers (
    id         text PRIMARY KEY,
    body       bytea NOT NULL,
    expires_ms bigint NOT NULL
);
CREATE TABLE tw.batches (
    id          text PRIMARY KEY,
    description bytea,
    settled     integer NOT NULL,
    failed      integer NOT NULL,
    expires_ms  bigint NOT NULL
);
CREATE INDEX batches_to_prune ON tw.batches (expires_ms);
CREATE TABLE tw.batch_members (
    batch      text NOT NULL,
    member     integer NOT NULL,
    failed     boolean NOT NULL,
    outcome    bytea NOT NULL,
    expires_ms bigint NOT NULL,
    PRIMARY KEY (batch, member)
);
CREATE INDEX batch_members_to_prune ON tw.batch_members (expires_ms);
CREATE TABLE tw.ledger (
    queue      text NOT NULL,
    subject    text NOT NULL,
    seq        bigserial NOT NULL,
    record     bytea NOT NULL,
    expires_ms bigint NOT NULL,
    PRIMARY KEY (queue, subject, seq)
);
CREATE INDEX ledger_to_prune ON tw.ledger (expires_ms);
""",
    # 2: the weights of fair-share keys (``fairness.py``)
    """
CREATE TABLE tw.fair_weights (
    queue  text NOT NULL,
    fair   text NOT NULL,
    weight integer NOT NULL,
    PRIMARY KEY (queue, fair)
);
""",
    # 3: priority aging (``aging.py``): when a waiting message is promoted, and the claim
    # that promotes the ready messages whose time has come (to 1001, ``PROMOTED_PRIORITY``)
    """
CREATE TABLE tw.aging (
    id         text PRIMARY KEY,
    queue      text NOT NULL,
    promote_ms bigint NOT NULL
);
CREATE INDEX aging_due ON tw.aging (queue, promote_ms);
CREATE OR REPLACE FUNCTION tw.claim(
    p_queue text, p_limit integer, p_now bigint, p_until bigint, p_token text, p_slot smallint
) RETURNS TABLE (
    c_id text, c_key text, c_body bytea, c_attempt integer, c_due bigint, c_at bigint,
    c_timeout bigint, c_priority integer, c_turn bigint
) LANGUAGE plpgsql AS $$
DECLARE
    v_expired integer;
    v_claimed integer := 0;
    v_fair boolean;
BEGIN
    WITH expiring AS MATERIALIZED (
        SELECT m.id FROM tw.messages AS m
        WHERE m.queue = p_queue AND m.state = 2 AND m.at_ms <= p_now
        FOR UPDATE SKIP LOCKED)
    UPDATE tw.messages AS m SET state = 1, at_ms = COALESCE(m.turn, m.due_ms), token = NULL
    FROM expiring WHERE m.id = expiring.id;
    GET DIAGNOSTICS v_expired = ROW_COUNT;
    WITH coming AS MATERIALIZED (
        SELECT m.id FROM tw.messages AS m
        WHERE m.queue = p_queue AND m.state = 0 AND m.at_ms <= p_until AND m.fair IS NULL
        ORDER BY m.at_ms, m.id LIMIT 10000 FOR UPDATE SKIP LOCKED)
    UPDATE tw.messages AS m SET state = 1 FROM coming WHERE m.id = coming.id;
    WITH aged AS MATERIALIZED (
        DELETE FROM tw.aging AS a WHERE a.queue = p_queue AND a.promote_ms <= p_now
        RETURNING a.id)
    UPDATE tw.messages AS m SET priority = 1001 FROM aged
    WHERE m.id = aged.id AND m.state = 1;
    v_fair := EXISTS (SELECT 1 FROM tw.messages AS m WHERE m.queue = p_queue
        AND m.state = 0 AND m.fair IS NOT NULL AND m.at_ms <= p_until);
    IF NOT v_fair THEN
        RETURN QUERY
        WITH picked AS MATERIALIZED (
            SELECT m.id FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 1
            ORDER BY m.priority DESC, m.at_ms, m.id LIMIT p_limit FOR UPDATE SKIP LOCKED)
        UPDATE tw.messages AS m SET state = 2, token = p_token, attempt = m.attempt + 1,
            at_ms = GREATEST(p_now, m.due_ms) + m.timeout_ms
        FROM picked WHERE m.id = picked.id
        RETURNING m.id, m.key, m.body, m.attempt, m.due_ms, m.at_ms, m.timeout_ms,
            m.priority, m.turn;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
    END IF;
    INSERT INTO tw.counters AS c (queue, name, slot, value)
    SELECT p_queue, n.name, p_slot, n.value
    FROM (VALUES ('claimed', v_claimed), ('redelivered', v_expired)) AS n(name, value)
    WHERE n.value > 0 ORDER BY n.name
    ON CONFLICT (queue, name, slot) DO UPDATE SET value = c.value + excluded.value;
    RETURN QUERY SELECT NULL::text, NULL::text, NULL::bytea, NULL::integer,
        CASE WHEN v_claimed = 0 AND NOT v_fair THEN LEAST(
            (SELECT min(m.at_ms) FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 0),
            (SELECT min(m.at_ms) FROM tw.messages AS m WHERE m.queue = p_queue AND m.state = 2))
        END,
        NULL::bigint, NULL::bigint, NULL::integer, v_fair::integer::bigint;
END
$$;
""",
)

VERSION = len(MIGRATIONS)


def checked_schema(name: str) -> str:
    """``name`` if it is a plain lower-case identifier (no quoting surprises)."""
    if not _IDENTIFIER.fullmatch(name):
        raise ConfigurationError(
            f"PostgreSQL schema name {name!r} must be lower-case letters, digits and "
            "underscores, starting with a letter or underscore (at most 63)"
        )
    return name


@lru_cache(maxsize=4096)
def qualify(sql: str, schema: str) -> str:
    """``sql`` with each ``tw.`` table prefix replaced by ``schema``'s."""
    return _TABLE.sub(f'"{schema}".', sql)


def install_script(schema: str = DEFAULT_SCHEMA) -> str:
    """Every statement that creates the schema at its newest version, for ``psql``, in
    one transaction."""
    parts = [
        "BEGIN;",
        f'CREATE SCHEMA IF NOT EXISTS "{schema}";',
        f'CREATE TABLE IF NOT EXISTS "{schema}".schema_version (version integer NOT NULL);',
    ]
    for version, statements in enumerate(MIGRATIONS, start=1):
        parts.append(f"-- version {version}")
        parts.append(qualify(statements.strip(), schema))
        parts.append(f'DELETE FROM "{schema}".schema_version;')
        parts.append(f'INSERT INTO "{schema}".schema_version (version) VALUES ({version});')
    parts.append("COMMIT;")
    return "\n".join(parts) + "\n"
