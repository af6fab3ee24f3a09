"""The inbox's hot statements, the claim and the finish of every delivery; ``Inbox`` runs them
as ``consumer.db.prepared`` statements (compiled once per dialect)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, bindparam, func, or_, update

from consumer.db import dialect as sql
from consumer.db.schema import inbox

RUNNING, FAILED = "running", "failed"
CLAIMED_COLUMNS = (
    "key", "route", "lease_until", "claimed_by", "message_id", "message", "created_at",
    "updated_at",
)  # fmt: skip


def claim(dialect: str) -> Any:
    """Insert the key as running, or take over a failed or lease-expired row; returns the
    attempt count (no row: held elsewhere, or finished). The lease is the one bound."""
    values = {name: bindparam(name, type_=inbox.c[name].type) for name in CLAIMED_COLUMNS}
    return sql.upsert(
        inbox,
        dialect,
        {"status": RUNNING, "attempts": 1, **values},
        conflict=[inbox.c.key],
        set_=lambda excluded: {
            "status": RUNNING,
            "attempts": inbox.c.attempts + 1,
            "lease_until": excluded.lease_until,
            "claimed_by": excluded.claimed_by,
            "message_id": excluded.message_id,
            "message": excluded.message,
            "updated_at": excluded.updated_at,
        },
        where=lambda excluded: or_(
            inbox.c.status == FAILED,
            and_(inbox.c.status == RUNNING, inbox.c.lease_until < excluded.updated_at),
        ),
    ).returning(inbox.c.attempts)


def finish(dialect: str) -> Any:
    """Record the outcome of a claim, guarded by its token; ``refund`` 1 gives the attempt back,
    ``finished_at`` NULL keeps the column as it was."""
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
