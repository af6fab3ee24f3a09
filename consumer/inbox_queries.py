"""The inbox's hot statements (the claim and the finish of every delivery), built once per
dialect with named bind parameters: a delivery binds values instead of rebuilding and
re-coercing a statement, and SQLAlchemy's compiled cache serves the SQL text."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, update
from sqlalchemy.dialects import postgresql, sqlite

from consumer.db.schema import inbox

RUNNING, FAILED = "running", "failed"
CLAIMED_COLUMNS = (
    "key", "route", "lease_until", "claimed_by", "message_id", "message", "created_at",
    "updated_at",
)  # fmt: skip


@dataclass(frozen=True)
class InboxQueries:
    claim: Any
    """Insert the key as running, or take over a failed or lease-expired row; returns the
    attempt count and the lease (no row: held elsewhere, or finished)."""
    finish: Any
    """Record the outcome of a claim, guarded by its token; ``refund`` 1 gives the attempt back,
    ``finished_at`` NULL keeps the column as it was."""


@cache
def queries_for(dialect: str) -> InboxQueries:
    return InboxQueries(claim=_claim(dialect), finish=_finish())


def _claim(dialect: str) -> Any:
    insert_of = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = {name: bindparam(name, type_=inbox.c[name].type) for name in CLAIMED_COLUMNS}
    insert = insert_of(inbox).values(status=RUNNING, attempts=1, **values)
    excluded = insert.excluded
    taken_over = or_(
        inbox.c.status == FAILED,
        and_(inbox.c.status == RUNNING, inbox.c.lease_until < excluded.updated_at),
    )
    return insert.on_conflict_do_update(
        index_elements=[inbox.c.key],
        set_={
            "status": RUNNING,
            "attempts": inbox.c.attempts + 1,
            "lease_until": excluded.lease_until,
            "claimed_by": excluded.claimed_by,
            "message_id": excluded.message_id,
            "message": excluded.message,
            "updated_at": excluded.updated_at,
        },
        where=taken_over,
    ).returning(inbox.c.attempts, inbox.c.lease_until)


def _finish() -> Any:
    return (
        update(inbox)
        .where(
            inbox.c.key == bindparam("b_key"),
            inbox.c.claimed_by == bindparam("b_token"),
            inbox.c.status == RUNNING,
        )
        .values(
            status=bindparam("b_status", type_=inbox.c.status.type),
            result=bindparam("b_result", type_=inbox.c.result.type),
            error=bindparam("b_error", type_=inbox.c.error.type),
            updated_at=bindparam("b_now", type_=inbox.c.updated_at.type),
            lease_until=None,
            attempts=inbox.c.attempts - bindparam("b_refund"),
            finished_at=func.coalesce(
                bindparam("b_finished_at", type_=inbox.c.finished_at.type), inbox.c.finished_at
            ),
        )
    )
