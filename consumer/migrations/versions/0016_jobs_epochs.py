"""The PostgreSQL jobs table partitioned by epoch, on a live database (docs/retention.md, "The
jobs table by epochs"). SQLite is unchanged.

Retention then drops an epoch's partition whole once every job in it finished before the
retention's cutoff (``consumer.jobs.epochs``), instead of deleting its rows one by one.

- ``jobs.epoch``: the partition key. Its default, ``consumer_job_epoch()``, reads the current
  epoch, ``job_epochs``' one row whose ``ended_at`` is NULL, in the inserting statement's own
  snapshot, which is taken after the statement locked ``jobs``. The switch to the next epoch
  (``consumer.jobs.epochs.switch``) takes ``LOCK TABLE jobs IN SHARE MODE`` first, which waits
  for every transaction that wrote to the table and holds off new ones, so **no transaction
  inserts into an epoch once a later one is current**: the earlier epochs only lose rows. (A
  ``REPEATABLE READ`` or ``SERIALIZABLE`` transaction keeps an older snapshot: there the
  function locks the row it read, which fails with ``40001`` if a switch ended that epoch
  since, and the caller retries, as it must at those levels anyway.)
- Every unique index carries the epoch (PostgreSQL requires it of a partitioned table), so it
  decides only among one epoch's rows. The trigger ``jobs_earlier_epochs`` covers the earlier
  ones for every producer (Python's enqueues, the bulk ``COPY`` path, the jobs topic, the job
  API, ``consumer_enqueue``): a new row whose idempotency key an earlier epoch holds is skipped,
  as ``ON CONFLICT DO NOTHING`` skips one the current epoch holds; a debounced job whose key has
  a pending job in an earlier epoch is folded into that one, as the upsert folds it into the
  current epoch's. Only keyed rows fire it, none before the first switch, and none of the bulk
  moves', which look their keys up themselves, set-based (``KEYS_CHECKED``). A debounced job's
  retry can put it back to pending in an earlier epoch, unseen by a later epoch's enqueue and
  unrefused by its index: both take the debounce key's advisory lock first
  (``consumer.jobs.debounce_race``), so each sees what the other committed.
- Steps, so that no lock is held for longer than a rename (as ``0015_inbox_partitions``):
  1. the column (default 0, which costs no rewrite), ``job_epochs`` and its function, then
     the default switched to the function, and ``consumer_enqueue`` made to skip a conflict on
     any unique index, which the plain table and the partitioned one both infer: a call in
     flight across the swap finds the new table by name, where ``ON CONFLICT
     (idempotency_key)`` had no index to infer and failed;
  2. the epoch-carrying unique indexes built on today's table ``CONCURRENTLY``, and
     ``CHECK (epoch = 0)`` validated (a scan under a lock that lets writes go on), so attaching
     trusts it instead of scanning again. The check is added ``NOT VALID`` in step 1: adding it
     takes ``ACCESS EXCLUSIVE``, which outside step 1's ``lock_timeout`` would wait for as long
     as a transaction holds the table, and queue every writer behind it;
  3. one transaction under ``lock_timeout``: today's table becomes partition ``jobs_e0`` (its
     indexes are adopted, the unique ones without the epoch dropped), the parent takes its
     triggers, and the next epoch's partition ``jobs_e1`` is made ahead.

  A table found empty under step 3's lock (a fresh install) is dropped and ``jobs_e0`` made anew.
  Each step can be run again after a failure.

Code from before this revision fails its debounced enqueues from step 3 on (``ON CONFLICT
(debounce_key)`` has no unique index to infer on the parent); everything else it writes works.

Revision ID: 0016_jobs_epochs
Revises: 0015_inbox_partitions
Create Date: 2026-12-04
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from alembic import op
from sqlalchemy import text

revision = "0016_jobs_epochs"
down_revision = "0015_inbox_partitions"
branch_labels = None
depends_on = None

LOCK_TIMEOUT = "5s"
"""Steps 1 and 3 wait this long at most for the writers in flight to let go of the table; past it
the migration fails, changes nothing more, and can be run again."""
LEGACY_RANGE = "jobs_e0_range"

EPOCHS = """
CREATE TABLE IF NOT EXISTS job_epochs (
    epoch integer PRIMARY KEY,
    started_at timestamptz NOT NULL,
    ended_at timestamptz
);
COMMENT ON TABLE job_epochs IS
    'the jobs table''s epochs (partitions jobs_eN); the current one has no ended_at';
CREATE UNIQUE INDEX IF NOT EXISTS job_epochs_current ON job_epochs ((true)) WHERE ended_at IS NULL;
INSERT INTO job_epochs (epoch, started_at) VALUES (0, now()) ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION consumer_job_epoch() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    current_epoch integer;
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        SELECT epoch INTO current_epoch FROM job_epochs WHERE ended_at IS NULL;
    ELSE  -- an older snapshot: locking the row fails (40001) if a switch ended it since
        SELECT epoch INTO current_epoch FROM job_epochs WHERE ended_at IS NULL FOR SHARE;
    END IF;
    RETURN current_epoch;
END
$$;
"""

UNIQUE = {
    "ids": "(id, epoch)",
    "idempotency_key": "(idempotency_key, epoch)",
    "debounce_pending": "(debounce_key, epoch) WHERE debounce_key IS NOT NULL "
    "AND status = 'pending'",
    "lock_key_running": "(lock_key, epoch) WHERE lock_key IS NOT NULL AND status = 'running'",
}
"""The unique indexes, by the name's tail: ``jobs_<tail>`` on the parent, ``jobs_e0_<tail>`` on
today's table."""
OTHER = {
    "claimable": "(priority DESC, COALESCE(fair_at, run_at), id) WHERE status = 'pending'",
    "group_turns": "(group_key, fair_at) WHERE group_key IS NOT NULL "
    "AND status IN ('pending', 'running')",
    "group_head": "(fair_at) WHERE group_key IS NOT NULL AND status = 'pending'",
    "leases": "(lease_until) WHERE status = 'running'",
    "finished": "(finished_at) WHERE finished_at IS NOT NULL",
    "lock_key_queue": "(lock_key, id) WHERE lock_key IS NOT NULL "
    "AND status IN ('pending', 'running')",
}
"""Today's other indexes, defined as their migrations made them: attaching adopts them."""
DROPPED = ("jobs_idempotency_key", "jobs_debounce_pending", "jobs_lock_key_running")
"""Today's unique indexes without the epoch (the primary key on ``id`` goes too)."""

KEYS_CHECKED = "consumer.keys_checked"
"""``SET LOCAL consumer.keys_checked TO on``: this transaction's inserts looked the keys up in the
earlier epochs themselves, and the trigger stays out of their way. The bulk moves do
(``consumer.jobs.bulk_queries``): a set-based lookup costs the database about 2 us a row, the
trigger's about 9 (a PL/pgSQL call, and a plan over the partitions, for every row); they set it
back to off after the move, as they run in the caller's transaction. Only keyed rows are looked
up either way."""
EARLIER_EPOCHS = f"""
CREATE OR REPLACE FUNCTION jobs_earlier_epochs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.idempotency_key IS NOT NULL AND EXISTS (
        SELECT 1 FROM jobs WHERE idempotency_key = NEW.idempotency_key AND epoch < NEW.epoch
    ) THEN
        RETURN NULL;  -- the key is taken: skipped, as ON CONFLICT DO NOTHING skips it
    END IF;
    IF NEW.debounce_key IS NOT NULL AND NEW.status = 'pending' THEN
        -- the key's lock, as a retry takes it (consumer.jobs.debounce_race): an earlier
        -- epoch's job put back to pending, uncommitted, is waited for, then folded into
        PERFORM pg_advisory_xact_lock(
            hashtextextended('jobs.debounce_key:' || NEW.debounce_key, 0));
        UPDATE jobs SET payload = NEW.payload, run_at = least(NEW.run_at, debounce_until),
                        updated_at = NEW.updated_at, trace_parent = NEW.trace_parent
            WHERE debounce_key = NEW.debounce_key AND status = 'pending' AND epoch < NEW.epoch;
        IF FOUND THEN
            RETURN NULL;  -- folded into the key's pending job, as the upsert folds it
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_earlier_epochs BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.epoch > 0 AND (NEW.idempotency_key IS NOT NULL OR NEW.debounce_key IS NOT NULL)
          AND current_setting('{KEYS_CHECKED}', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION jobs_earlier_epochs();
"""
"""Fires before ``jobs_group_turn`` (triggers fire in name order): a skipped row takes no turn."""
TRIGGERS = """
CREATE TRIGGER jobs_group_turn BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.group_key IS NOT NULL) EXECUTE FUNCTION jobs_group_turn();
CREATE TRIGGER jobs_notify_due AFTER INSERT ON jobs REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify_due();
"""
"""0012's and 0013's triggers, on the parent (each partition takes the row trigger)."""
ENQUEUE_CONFLICT = ("ON CONFLICT (idempotency_key) DO NOTHING", "ON CONFLICT DO NOTHING")
"""``consumer_enqueue``'s clause before and after: any unique index's conflict skips the row
(the new job is pending, so only the key's index can refuse it), on either table."""


def _revision_module(filename: str) -> Any:
    path = Path(__file__).with_name(filename)
    spec = importlib.util.spec_from_file_location(filename.removesuffix(".py"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _enqueue(conflict: str) -> str:
    """0013's ``consumer_enqueue`` (replaceable, keeping its owner and grants) with ``conflict``
    as its ``ON CONFLICT`` clause."""
    body = str(_revision_module("0013_notify_trigger.py")._enqueue_without_notify())
    assert ENQUEUE_CONFLICT[0] in body
    return body.replace(ENQUEUE_CONFLICT[0], conflict, 1)


def _index_is_invalid(name: str) -> bool:
    found = op.get_bind().execute(
        text("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(:name) AND NOT indisvalid"),
        {"name": name},
    )
    return found.first() is not None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    op.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS epoch integer NOT NULL DEFAULT 0")
    op.execute(EPOCHS)
    op.execute("ALTER TABLE jobs ALTER COLUMN epoch SET DEFAULT consumer_job_epoch()")
    op.execute(_enqueue(ENQUEUE_CONFLICT[1]))
    op.execute(f"ALTER TABLE jobs DROP CONSTRAINT IF EXISTS {LEGACY_RANGE}")
    op.execute(f"ALTER TABLE jobs ADD CONSTRAINT {LEGACY_RANGE} CHECK (epoch = 0) NOT VALID")
    with op.get_context().autocommit_block():
        for tail, columns in UNIQUE.items():
            name = f"jobs_e0_{tail}"
            if _index_is_invalid(name):  # left by a run that failed while building it
                op.execute(f"DROP INDEX CONCURRENTLY {name}")
            op.execute(f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {name} ON jobs {columns}")
        op.execute(f"ALTER TABLE jobs VALIDATE CONSTRAINT {LEGACY_RANGE}")
    op.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    _swap()


def _swap() -> None:
    """Step 3: today's table becomes the first partition, in one transaction."""
    op.execute("ALTER TABLE jobs RENAME TO jobs_e0")
    op.execute("ALTER TABLE jobs_e0 DROP CONSTRAINT jobs_pkey")
    for name in DROPPED:
        op.execute(f"DROP INDEX {name}")
    for tail in OTHER:
        op.execute(f"ALTER INDEX jobs_{tail} RENAME TO jobs_e0_{tail}")
    op.execute("DROP TRIGGER jobs_group_turn ON jobs_e0")
    op.execute("DROP TRIGGER jobs_notify_due ON jobs_e0")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY NONE")
    op.execute(
        "CREATE TABLE jobs (LIKE jobs_e0 INCLUDING DEFAULTS INCLUDING COMMENTS) "
        "PARTITION BY LIST (epoch)"
    )
    op.execute("COMMENT ON COLUMN jobs.epoch IS 'the epoch whose partition holds the row'")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id")
    for tail, columns in UNIQUE.items():
        op.execute(f"CREATE UNIQUE INDEX jobs_{tail} ON jobs {columns}")
    for tail, columns in OTHER.items():
        op.execute(f"CREATE INDEX jobs_{tail} ON jobs {columns}")
    held = op.get_bind().execute(text("SELECT EXISTS (SELECT 1 FROM jobs_e0)")).scalar_one()
    if held:
        op.execute("ALTER TABLE jobs ATTACH PARTITION jobs_e0 FOR VALUES IN (0)")
        op.execute(f"ALTER TABLE jobs_e0 DROP CONSTRAINT {LEGACY_RANGE}")
    else:  # empty under the rename's lock: no row to keep, none can arrive before the commit
        op.execute("DROP TABLE jobs_e0")
        op.execute("CREATE TABLE jobs_e0 PARTITION OF jobs FOR VALUES IN (0)")
    op.execute("CREATE TABLE jobs_e1 PARTITION OF jobs FOR VALUES IN (1)")
    op.execute(TRIGGERS)
    op.execute(EARLIER_EPOCHS)


def downgrade() -> None:
    """Back to one table: every row copied under a lock that stops the writers (not live)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE jobs RENAME TO jobs_epochs")
    for tail in (*UNIQUE, *OTHER):
        op.execute(f"ALTER INDEX jobs_{tail} RENAME TO jobs_epochs_{tail}")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY NONE")
    op.execute("CREATE TABLE jobs (LIKE jobs_epochs INCLUDING DEFAULTS INCLUDING COMMENTS)")
    op.execute("ALTER TABLE jobs DROP COLUMN epoch")
    columns = ", ".join(
        row[0]
        for row in op.get_bind().execute(
            text(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'jobs'::regclass "
                "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
            )
        )
    )
    op.execute(f"INSERT INTO jobs ({columns}) SELECT {columns} FROM jobs_epochs")
    op.execute("DROP TABLE jobs_epochs")
    op.execute("DROP FUNCTION jobs_earlier_epochs()")
    op.execute("DROP TABLE job_epochs")
    op.execute("DROP FUNCTION consumer_job_epoch()")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id")
    op.execute("ALTER TABLE jobs ADD PRIMARY KEY (id)")
    op.execute("CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key)")
    for tail in ("debounce_pending", "lock_key_running"):
        op.execute(f"CREATE UNIQUE INDEX jobs_{tail} ON jobs {UNIQUE[tail].replace(', epoch', '')}")
    for tail, columns in OTHER.items():
        op.execute(f"CREATE INDEX jobs_{tail} ON jobs {columns}")
    op.execute(TRIGGERS)
    op.execute(_enqueue(ENQUEUE_CONFLICT[0]))
