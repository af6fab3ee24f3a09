"""Job groups: ``jobs.group_key`` (a tenant, a customer: groups take turns in the claim),
``jobs.fair_at`` (a grouped job's turn, set on insert), ``job_group_flow`` (the rows a group cap or
rate locks), ``job_kinds.group_field`` (the payload field a kind groups by), and
``consumer_enqueue`` with an optional ``group_key`` argument.

The turn is set by a trigger, so every way in (Python, the SQL function, any bulk path) gets it,
and only for grouped rows (``WHEN (NEW.group_key IS NOT NULL)``: an ungrouped insert runs no
trigger). A grouped job's turn is the later of the earliest pending grouped turn (where the
claims are now; none pending: its ``run_at``) and one millisecond after its group's last
unfinished turn: a group's backlog is spread out behind its first job, a group's next job comes
one turn after its last, and a new group's first job goes next (start-time fair queueing). The
claim's order index becomes ``(priority DESC, coalesce(fair_at, run_at), id)``: an ungrouped
job's place is its ``run_at``, as before.

Revision ID: 0012_job_groups
Revises: 0011_running_cancel
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0012_job_groups"
down_revision = "0011_running_cancel"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
UNFINISHED_GROUPED = sa.text("group_key IS NOT NULL AND status IN ('pending', 'running')")
PENDING_GROUPED = sa.text("group_key IS NOT NULL AND status = 'pending'")
PENDING_DEBOUNCED = sa.text("debounce_key IS NOT NULL AND status = 'pending'")
GROUP_COMMENT = "jobs of different groups take turns in the claim; NULL: no group"
TURN_COMMENT = "a grouped job's turn, set on insert (trigger jobs_group_turn); NULL: run_at"
OLD_SIGNATURE = "text, jsonb, text, timestamptz, integer, integer, text"
SIGNATURE = f"{OLD_SIGNATURE}, text"

PG_TURN = """
CREATE FUNCTION jobs_group_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fair_at := greatest(
        coalesce((SELECT min(fair_at) FROM jobs
                  WHERE group_key IS NOT NULL AND status = 'pending'), NEW.run_at),
        (SELECT max(fair_at) FROM jobs
            WHERE group_key = NEW.group_key AND status IN ('pending', 'running'))
            + interval '1 millisecond'
    );
    RETURN NEW;
END
$$;
CREATE TRIGGER jobs_group_turn BEFORE INSERT ON jobs FOR EACH ROW
    WHEN (NEW.group_key IS NOT NULL) EXECUTE FUNCTION jobs_group_turn();
"""
SQLITE_TURN = """
CREATE TRIGGER jobs_group_turn AFTER INSERT ON jobs WHEN NEW.group_key IS NOT NULL
BEGIN
    UPDATE jobs SET fair_at = strftime('%Y-%m-%d %H:%M:%f', max(
        coalesce((SELECT julianday(min(fair_at)) FROM jobs
                  WHERE group_key IS NOT NULL AND status = 'pending' AND id <> NEW.id),
                 julianday(NEW.run_at)),
        coalesce((SELECT julianday(max(fair_at)) + 1.0 / 86400000 FROM jobs
                  WHERE group_key = NEW.group_key AND status IN ('pending', 'running')
                  AND id <> NEW.id), 0)
    )) || '000' WHERE id = NEW.id;
END
"""

NEW_ARGUMENT = (
    "lock_key text DEFAULT NULL\n) RETURNS bigint",
    "lock_key text DEFAULT NULL, group_key text DEFAULT NULL\n) RETURNS bigint",
)
NEW_GROUP = (
    "    INSERT INTO jobs (kind,",
    "    IF consumer_enqueue.group_key = '' THEN\n"
    "        RAISE EXCEPTION 'consumer_enqueue: group_key must be non-empty or NULL'\n"
    "            USING ERRCODE = '22023';\n"
    "    END IF;\n"
    "    grouped := coalesce(consumer_enqueue.group_key, kept ->> declared.group_field);\n"
    "    INSERT INTO jobs (group_key, kind,",
)
NEW_VALUE = (
    "        VALUES (consumer_enqueue.kind,",
    "        VALUES (grouped, consumer_enqueue.kind,",
)
NEW_DECLARE = ("    new_id bigint;", "    new_id bigint;\n    grouped text;")


def _sql_enqueue() -> str:
    """0010's ``consumer_enqueue``, as it created it (the downgrade restores it)."""
    path = Path(__file__).with_name("0010_sql_enqueue.py")
    spec = importlib.util.spec_from_file_location("sql_enqueue_0010", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.CREATE_FUNCTION)


def _grouped_enqueue() -> str:
    """0010's function with the group: an argument, else the kind's ``group_field`` of the
    payload as kept (so a producer cannot pick a group through a field the kind filters out)."""
    body = _sql_enqueue()
    for old, new in (NEW_ARGUMENT, NEW_GROUP, NEW_VALUE, NEW_DECLARE):
        assert old in body, old
        body = body.replace(old, new, 1)
    return body


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("group_key", sa.Text, nullable=True, comment=GROUP_COMMENT))
        batch.add_column(sa.Column("fair_at", UTCDateTime, nullable=True, comment=TURN_COMMENT))
        batch.add_column(
            sa.Column(
                "debounce_key",
                sa.Text,
                nullable=True,
                comment="enqueues with it, pending, are one job",
            )
        )
        batch.add_column(sa.Column("debounce_until", UTCDateTime, nullable=True,
                                   comment="a debounced job's latest run"))  # fmt: skip
    with op.batch_alter_table("job_kinds") as batch:
        batch.add_column(sa.Column("group_field", sa.String(200), nullable=True,
                                   comment="the payload field that groups"))  # fmt: skip
    op.drop_index("jobs_claimable", table_name="jobs")
    op.create_index(
        "jobs_claimable", "jobs",
        [sa.text("priority DESC"), sa.text("coalesce(fair_at, run_at)"), "id"],
        postgresql_where=PENDING, sqlite_where=PENDING,
    )  # fmt: skip
    op.create_index(
        "jobs_group_turns",
        "jobs",
        ["group_key", "fair_at"],
        postgresql_where=UNFINISHED_GROUPED,
        sqlite_where=UNFINISHED_GROUPED,
    )
    op.create_index(
        "jobs_group_head",
        "jobs",
        ["fair_at"],
        postgresql_where=PENDING_GROUPED,
        sqlite_where=PENDING_GROUPED,
    )
    op.create_index(
        "jobs_debounce_pending",
        "jobs",
        ["debounce_key"],
        unique=True,
        postgresql_where=PENDING_DEBOUNCED,
        sqlite_where=PENDING_DEBOUNCED,
    )
    op.create_table(
        "job_group_flow",
        sa.Column("kind", sa.String(100), primary_key=True),
        sa.Column("group_key", sa.Text, primary_key=True),
        sa.Column("tat", UTCDateTime, nullable=True,
                  comment="the group rate's theoretical arrival time"),
    )  # fmt: skip
    if postgresql:
        op.execute(PG_TURN)
        op.execute(f"DROP FUNCTION consumer_enqueue({OLD_SIGNATURE})")
        op.execute(_grouped_enqueue())
        op.execute(f"REVOKE ALL ON FUNCTION consumer_enqueue({SIGNATURE}) FROM PUBLIC")
    else:
        op.execute(SQLITE_TURN)


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    op.execute("DROP TRIGGER jobs_group_turn" + (" ON jobs" if postgresql else ""))
    if postgresql:
        op.execute("DROP FUNCTION jobs_group_turn()")
        op.execute(f"DROP FUNCTION consumer_enqueue({SIGNATURE})")
        op.execute(_sql_enqueue())
        op.execute(f"REVOKE ALL ON FUNCTION consumer_enqueue({OLD_SIGNATURE}) FROM PUBLIC")
    op.drop_table("job_group_flow")
    op.drop_index("jobs_debounce_pending", table_name="jobs")
    op.drop_index("jobs_group_head", table_name="jobs")
    op.drop_index("jobs_group_turns", table_name="jobs")
    op.drop_index("jobs_claimable", table_name="jobs")
    op.create_index(
        "jobs_claimable",
        "jobs",
        [sa.text("priority DESC"), "run_at", "id"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    with op.batch_alter_table("job_kinds") as batch:
        batch.drop_column("group_field")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("debounce_until")
        batch.drop_column("debounce_key")
        batch.drop_column("fair_at")
        batch.drop_column("group_key")
