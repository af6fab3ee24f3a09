"""The inbox's hot statements (the claim and the finish of every delivery), compiled once per
dialect: a delivery binds its values into SQL text that is already built, instead of going
through SQLAlchemy's statement compilation, parameter construction and result set-up twice per
request. Execution still goes through the ``Connection``, so database faults are translated and a
dead connection is invalidated exactly as for any other statement."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, CursorResult, and_, bindparam, func, or_, update
from sqlalchemy.engine import Dialect

from consumer.db import dialect as sql
from consumer.db.schema import inbox

RUNNING, FAILED = "running", "failed"
CLAIMED_COLUMNS = (
    "key", "route", "lease_until", "claimed_by", "message_id", "message", "created_at",
    "updated_at",
)  # fmt: skip


@dataclass(frozen=True)
class Prepared:
    """One statement compiled for one dialect: its SQL text, the values of its constant binds,
    and the conversions its column types apply to bound values (JSON, UTC datetimes)."""

    sql: str
    defaults: Mapping[str, Any]
    processors: Mapping[str, Callable[[Any], Any]]
    positions: tuple[str, ...] | None
    """Bind names in order, for a positional paramstyle (SQLite's ``?``)."""

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> Prepared:
        compiled = statement.compile(dialect=dialect)
        positions = tuple(compiled.positiontup) if compiled.positional else None
        defaults = compiled.construct_params(_check=False)
        return cls(compiled.string, defaults, dict(compiled._bind_processors), positions)

    def execute(self, connection: Connection, values: Mapping[str, Any]) -> CursorResult[Any]:
        params = {**self.defaults, **values}
        for name, process in self.processors.items():
            params[name] = process(params[name])
        if self.positions is not None:
            return connection.exec_driver_sql(self.sql, tuple(params[n] for n in self.positions))
        return connection.exec_driver_sql(self.sql, params)


@dataclass(frozen=True)
class InboxQueries:
    claim: Prepared
    """Insert the key as running, or take over a failed or lease-expired row; returns the
    attempt count (no row: held elsewhere, or finished). The lease is the one bound."""
    finish: Prepared
    """Record the outcome of a claim, guarded by its token; ``refund`` 1 gives the attempt back,
    ``finished_at`` NULL keeps the column as it was."""


_COMPILED: dict[tuple[str, str], InboxQueries] = {}


def queries_for(dialect: Dialect) -> InboxQueries:
    """The statements for ``dialect``, compiled on first use (per dialect and driver)."""
    name = (dialect.name, dialect.driver)
    if name not in _COMPILED:
        claim = Prepared.compile(_claim(dialect.name), dialect)
        _COMPILED[name] = InboxQueries(claim, Prepared.compile(_finish(), dialect))
    return _COMPILED[name]


def _claim(dialect: str) -> Any:
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
