"""A job due now NOTIFYs channel ``consumer_jobs`` from the table itself: one statement-level
``AFTER INSERT`` trigger (``jobs_notify_due``) covers every producer (Python's ``enqueue`` and
``enqueue_many``, the jobs topic, the job API, ``consumer_enqueue`` and any bulk path) once per
statement, in the inserting transaction, so PostgreSQL delivers it on commit and never after a
rollback. Each Python enqueue used to send its own ``pg_notify`` as one more round trip; the SQL
function's own NOTIFY is dropped (the trigger sends it).

A file import opts out (``QUIET_SETTING``). "Due now" allows one second (``DUE_WITHIN``): a
row's ``run_at`` may come from a client whose clock runs a little ahead of the database's, and a
job due that soon is worth a sweep. The
notification carries no payload, and equal ones of a transaction fold into one. SQLite has no
NOTIFY and is unchanged.

Revision ID: 0013_notify_trigger
Revises: 0012_job_groups
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0013_notify_trigger"
down_revision = "0012_job_groups"
branch_labels = None
depends_on = None

DUE_WITHIN = "1 second"
QUIET_SETTING = "consumer.notify"
"""``SET LOCAL consumer.notify TO off``: this transaction's inserts NOTIFY nobody. A file import
sets it (``consumer.jobs.bulk``): measured in ``tests/storage/test_e2e.py``, a 200,000-row
import under a 2 s budget finished in 12 s when nothing swept its jobs and did not finish in
120 s when each batch's NOTIFY started sweeps of them in the importing processes. Its jobs
start on the next wake-up or ``sweep`` tick, as before this revision."""
PG_NOTIFY = f"""
CREATE FUNCTION jobs_notify_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('{QUIET_SETTING}', true), '') <> 'off'
       AND EXISTS (SELECT 1 FROM inserted WHERE status = 'pending'
                   AND run_at <= statement_timestamp() + interval '{DUE_WITHIN}') THEN
        PERFORM pg_notify('consumer_jobs', '');
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify_due AFTER INSERT ON jobs REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_notify_due();
"""
FUNCTION_NOTIFY = """    IF due <= now() THEN
        PERFORM pg_notify('consumer_jobs', '');  -- one per transaction: equal ones fold
    END IF;
"""


def _grouped_enqueue() -> str:
    """0012's ``consumer_enqueue``, replaceable (the downgrade restores it)."""
    path = Path(__file__).with_name("0012_job_groups.py")
    spec = importlib.util.spec_from_file_location("job_groups_0012", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    body = str(module._grouped_enqueue())
    return body.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def _enqueue_without_notify() -> str:
    body = _grouped_enqueue()
    assert FUNCTION_NOTIFY in body
    return body.replace(FUNCTION_NOTIFY, "", 1)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_NOTIFY)
        op.execute(_enqueue_without_notify())  # keeps its owner and grants


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_notify_due ON jobs")
        op.execute("DROP FUNCTION jobs_notify_due()")
        op.execute(_grouped_enqueue())
