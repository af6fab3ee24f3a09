"""``consumer_enqueue(...)``: enqueue a job from any language, inside the caller's transaction
(PostgreSQL only), and ``job_kinds``, the kinds the serving processes run (consumer.jobs.schema).

The function checks what it can know: the kind must be one a serving process has declared in
``job_kinds`` (written at start-up, ``consumer.jobs.listen``), the payload a JSON object within
that process's ``CONSUMER_JOBS_MAX_PAYLOAD_BYTES``, filtered to the kind's producer fields as a
message on the jobs topic is. A refusal raises SQLSTATE ``22023`` and stores nothing. A key
already used returns that job's id. A job due now NOTIFYs channel ``consumer_jobs``: PostgreSQL
delivers it when the caller commits (never on a rollback), and the pods that LISTEN sweep at once.

It runs as its owner (``SECURITY DEFINER``, the role that migrates), so a caller needs only
``EXECUTE`` on it, no right on the consumer's tables: the migration revokes it from ``PUBLIC`` and
the team grants it to its own roles (docs/jobs.md). ``SET search_path FROM CURRENT`` pins the
schema the migration ran in: the body finds its tables, and nothing a caller puts on its own
search path can stand in for them. SQLite has no such function: Python's ``consumer.enqueue``
is the way there.

Revision ID: 0010_sql_enqueue
Revises: 0009_one_history
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0010_sql_enqueue"
down_revision = "0009_one_history"
branch_labels = None
depends_on = None

FIELDS_COMMENT = "what SQL producers may set in the payload; NULL: every field"
SIGNATURE = "text, jsonb, text, timestamptz, integer, integer, text"
CREATE_FUNCTION = """
CREATE FUNCTION consumer_enqueue(
    kind text, payload jsonb DEFAULT '{}', key text DEFAULT NULL, run_at timestamptz DEFAULT NULL,
    priority integer DEFAULT 0, max_attempts integer DEFAULT NULL, lock_key text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    declared job_kinds%ROWTYPE;
    kept jsonb := consumer_enqueue.payload;
    due timestamptz := coalesce(consumer_enqueue.run_at, now());
    new_id bigint;
BEGIN
    SELECT * INTO declared FROM job_kinds WHERE job_kinds.kind = consumer_enqueue.kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'consumer_enqueue: unknown job kind %',
            quote_nullable(consumer_enqueue.kind)
            USING ERRCODE = '22023',
                  HINT = 'known: ' || coalesce((SELECT string_agg(k.kind, ', ' ORDER BY k.kind)
                                                FROM job_kinds k), 'none');
    END IF;
    IF kept IS NULL OR jsonb_typeof(kept) <> 'object' THEN
        RAISE EXCEPTION 'consumer_enqueue: the payload must be a JSON object, not %',
            coalesce(jsonb_typeof(kept), 'NULL') USING ERRCODE = '22023';
    END IF;
    IF octet_length(kept::text) > declared.max_payload_bytes THEN
        RAISE EXCEPTION 'consumer_enqueue: the payload is % bytes, over the %-byte limit',
            octet_length(kept::text), declared.max_payload_bytes USING ERRCODE = '22023';
    END IF;
    IF consumer_enqueue.key = '' OR consumer_enqueue.lock_key = '' THEN
        RAISE EXCEPTION 'consumer_enqueue: key and lock_key must be non-empty or NULL'
            USING ERRCODE = '22023';
    END IF;
    IF consumer_enqueue.max_attempts < 1 OR consumer_enqueue.priority IS NULL THEN
        RAISE EXCEPTION 'consumer_enqueue: max_attempts must be at least 1 (or NULL), '
            'priority an integer' USING ERRCODE = '22023';
    END IF;
    IF declared.producer_fields IS NOT NULL THEN
        SELECT coalesce(jsonb_object_agg(f.name, f.value), '{}') INTO kept
            FROM jsonb_each(kept) AS f(name, value)
            WHERE declared.producer_fields::jsonb ? f.name;
    END IF;
    INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts,
                      idempotency_key, created_at, updated_at, lock_key)
        VALUES (consumer_enqueue.kind, kept::json, 'pending', consumer_enqueue.priority, due, 0,
                consumer_enqueue.max_attempts, consumer_enqueue.key, now(), now(),
                consumer_enqueue.lock_key)
        ON CONFLICT (idempotency_key) DO NOTHING
        RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RETURN (SELECT id FROM jobs WHERE idempotency_key = consumer_enqueue.key);
    END IF;
    IF due <= now() THEN
        PERFORM pg_notify('consumer_jobs', '');  -- one per transaction: equal ones fold
    END IF;
    RETURN new_id;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "job_kinds",
        sa.Column("kind", sa.String(100), primary_key=True),
        sa.Column("producer_fields", sa.JSON, nullable=True, comment=FIELDS_COMMENT),
        sa.Column("max_payload_bytes", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CREATE_FUNCTION)
        op.execute(f"REVOKE ALL ON FUNCTION consumer_enqueue({SIGNATURE}) FROM PUBLIC")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION consumer_enqueue({SIGNATURE})")
    op.drop_table("job_kinds")
