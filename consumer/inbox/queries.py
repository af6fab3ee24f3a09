"""Every SQL statement on the ``inbox`` table, each named once; ``Inbox`` runs them (the tick
tables' are ``consumer.ticks.queries``).

The claim and the finish of every delivery are the hot statements: ``Inbox`` runs them as
``consumer.db.prepared`` statements, compiled once per dialect, or on a PostgreSQL connection in
autocommit as ``consumer.db.direct`` ones, prepared once per server session. Every write after
the claim says ``WHERE key = ? AND claimed_by = ? AND status = 'running'``: zero rows means
another delivery took the lease over, and nothing is overwritten.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Integer,
    Select,
    Text,
    Update,
    and_,
    bindparam,
    case,
    column,
    func,
    literal_column,
    null,
    or_,
    select,
    table,
    true,
    update,
)

from consumer.db import dialect as sql
from consumer.db.prepared import Build
from consumer.inbox.model import FINAL, Claim, Status
from consumer.inbox.schema import PARTITION_NAME, inbox

RUNNING: ColumnElement[str] = literal_column("'running'")
FAILED: ColumnElement[str] = literal_column("'failed'")
"""Constants written into the hot statements' SQL: a bound constant costs the driver a value to
adapt and send on every delivery."""
ONE: ColumnElement[int] = literal_column("1")
CLAIMED_COLUMNS = ("key", "route", "lease_until", "claimed_by", "message_id", "message")

# --- a delivery: claim, finish (prepared), then what a retry or a long handler needs --------------


def claim(dialect: str) -> Any:
    """Insert the key as running, or take over a failed or lease-expired row; returns the
    attempt count and, on PostgreSQL, the partition that holds the row (no row: held elsewhere,
    or finished). The lease is the one bound; ``now`` is bound once, as both timestamps of a new
    row.

    On PostgreSQL the inbox is partitioned by week, and a unique index only sees its own
    partition: the claim is ``consumer_inbox_claim`` (migration ``0014_inbox_placed``), which
    serializes the claims of one key on an advisory lock and looks for the key in every
    partition. SQLite keeps one table and one ``INSERT ... ON CONFLICT``."""
    values = {name: bindparam(name, type_=inbox.c[name].type) for name in CLAIMED_COLUMNS}
    now = bindparam("now", type_=inbox.c.updated_at.type)
    if dialect == sql.POSTGRESQL:
        arguments = [values[name] for name in CLAIMED_COLUMNS]  # the function's order
        claimed = func.consumer_inbox_claim(*arguments, now).table_valued(
            column("attempts", Integer), column("stored_in", Text)
        )
        return select(claimed.c.attempts, claimed.c.stored_in)
    return sql.upsert(
        inbox,
        dialect,
        {"status": RUNNING, "attempts": ONE, **values, "created_at": now, "updated_at": now},
        conflict=[inbox.c.key],
        set_=lambda excluded: {
            "status": RUNNING,
            "attempts": inbox.c.attempts + ONE,
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


@functools.cache
def finish_in(partition: str | None) -> Build:
    """The finish of a row held in ``partition`` (``None``: the ``inbox`` table itself, as on
    SQLite), built once per partition, so that its compiled forms are cached per partition too
    (``consumer.db.prepared``, ``consumer.db.direct``, which names the server's statement after
    the build: ``finish_inbox_w20261207``). A name the partitioning would not make (a partition
    an operator attached by hand) is not written into SQL: that finish goes through the parent."""
    if partition is not None and not PARTITION_NAME.fullmatch(partition):
        return finish_in(None)
    target = inbox if partition is None else table(partition, *(column(c.name) for c in inbox.c))

    def finish(dialect: str) -> Any:
        """Record the outcome of a claim, guarded by its token; ``refund`` 1 gives the attempt
        back. A final status stamps ``finished_at``; any other keeps the column as it was. On
        PostgreSQL the update names the partition the claim found the row in (a running row
        never moves: the retention carries only rows at rest, ``consumer.inbox.partitions``):
        through the parent, PostgreSQL would plan it afresh on every run to prune the weeks.
        Its status test is ``status_is``'s."""
        columns = target.c
        status = bindparam("b_status", type_=inbox.c.status.type)
        now = bindparam("b_now", type_=inbox.c.updated_at.type)
        final = or_(*(status == literal_column(f"'{each}'") for each in sorted(FINAL)))
        return (
            update(target)
            .where(
                columns.key == bindparam("b_key", type_=inbox.c.key.type),
                columns.claimed_by == bindparam("b_token", type_=inbox.c.claimed_by.type),
                status_is(columns.status, RUNNING),
            )
            .values(
                status=status,
                result=bindparam("b_result", type_=inbox.c.result.type),
                error=bindparam("b_error", type_=inbox.c.error.type),
                updated_at=now,
                lease_until=null(),
                attempts=columns.attempts - bindparam("b_refund"),
                finished_at=case((final, now), else_=columns.finished_at),
            )
        )

    finish.__name__ = "finish" if partition is None else f"finish_{partition}"
    return finish


finish = finish_in(None)


def finished_as(claim: Claim, status: Status) -> Select[Any]:
    """The row, if this claim's own write recorded ``status`` (a lost reply, not a lost lease)."""
    return select(inbox.c.key).where(
        inbox.c.key == claim.key,
        inbox.c.claimed_by == claim.token,
        status_is(inbox.c.status, status),
    )


def heartbeat(claim: Claim, lease_until: datetime, now: datetime) -> Update:
    """The lease of a row this claim still holds, pushed to ``lease_until``."""
    return _owned(claim).values(lease_until=lease_until, updated_at=now)


def _owned(claim: Claim) -> Update:
    return update(inbox).where(
        inbox.c.key == claim.key,
        inbox.c.claimed_by == claim.token,
        status_is(inbox.c.status, RUNNING),
    )


def status_is(column: ColumnElement[str], status: ColumnElement[str] | str) -> ColumnElement[bool]:
    """The status test of every statement that reaches its row by key: ``(status = ?) IS TRUE``,
    the same test (the column is ``NOT NULL``) but one no index serves. A week's partition starts
    empty and unanalyzed, and a statement prepared then kept a plan on the ``(status,
    updated_at)`` index until autovacuum analyzed the week (a minute or more), walking every
    finished row's dead entry: the finish doubled the database's CPU per push in the push
    bench (``tests/inbox/test_finish_plan.py``)."""
    return (column == status).is_(true())


def holder(key: str) -> Select[Any]:
    """Status, message id and message format of the row holding ``key``, not its message."""
    return select(inbox.c.status, inbox.c.message_id, inbox.c.message["format"].as_string()).where(
        inbox.c.key == key
    )


# --- operations: inspect, replay, purge -----------------------------------------------------------


def by_key(key: str) -> Select[Any]:
    """The whole row of ``key``."""
    return select(inbox).where(inbox.c.key == key)


def listed(status: Status | None, limit: int) -> Select[Any]:
    """Most recently updated first, of one status or all."""
    query = select(inbox).order_by(inbox.c.updated_at.desc()).limit(limit)
    if status is not None:
        query = query.where(inbox.c.status == status)
    return query


def key_locked(key: str) -> Select[Any]:
    """PostgreSQL: wait for the key's transaction-scoped advisory lock, the one the claim and a
    retirement's carry take, so a write outside them never meets the row mid-move."""
    return select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0)))


def rearmed(key: str, now: datetime) -> Update:
    """A dead, unroutable or failed row, claimable again with fresh attempts (replay)."""
    return (
        update(inbox)
        .where(inbox.c.key == key)
        .where(inbox.c.status.in_([Status.DEAD, Status.UNROUTABLE, Status.FAILED]))
        .values(status=Status.FAILED, attempts=0, updated_at=now)
    )


def lapsed(before: datetime, limit: int) -> Select[Any]:
    """Keys of ``running`` rows whose lease ran out before ``before``, the longest lapsed first:
    a delivery died and no redelivery took its row over (the re-drive)."""
    return (
        select(inbox.c.key)
        .where(inbox.c.status == Status.RUNNING, inbox.c.lease_until < before)
        .order_by(inbox.c.lease_until)
        .limit(limit)
    )


def buried(key: str, now: datetime, error: str) -> Update:
    """A ``running`` row whose lease ran out, recorded ``dead`` with ``error`` and the attempt it
    was; guarded like a claim's take-over, so a delivery that took the row over keeps it."""
    return (
        update(inbox)
        .where(inbox.c.key == key, inbox.c.status == Status.RUNNING, inbox.c.lease_until < now)
        .values(
            status=Status.DEAD, error=error, attempts=inbox.c.attempts + 1, lease_until=null(),
            updated_at=now, finished_at=now,
        )
    )  # fmt: skip


def purged(finished_before: datetime, limit: int | None) -> Delete:
    """Finished rows, failed rows nobody retried and expired running rows, older than
    ``finished_before``; at most ``limit`` of them."""
    expired = or_(
        and_(inbox.c.status.in_(list(FINAL)), inbox.c.finished_at < finished_before),
        # A failed row whose message Pub/Sub stopped redelivering (dead-lettered, expired).
        and_(inbox.c.status == Status.FAILED, inbox.c.updated_at < finished_before),
        # A delivery that died and whose message never came back: nobody will finish it.
        and_(inbox.c.status == Status.RUNNING, inbox.c.lease_until < finished_before),
    )
    return sql.purge(inbox, inbox.c.key, expired, limit)
