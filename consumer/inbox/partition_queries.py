"""The statements of the PostgreSQL inbox's week partitions, each named once;
``consumer.inbox.partitions`` runs them.

What retention keeps is ``queries.purged``'s rule, read from that statement and aimed at one
partition, so the partitions' retirement and the chunked purge can never disagree on a row.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnClause,
    ColumnElement,
    Exists,
    Select,
    TableClause,
    Update,
    bindparam,
    column,
    exists,
    func,
    or_,
    select,
    table,
    text,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.visitors import replacement_traverse

from consumer.db import locked as locked_steps
from consumer.inbox import queries
from consumer.inbox.model import Status
from consumer.inbox.schema import inbox

RETIRED = "_retired"
AT_REST = [status for status in Status if status is not Status.RUNNING]

LISTED = text("""
SELECT c.relname AS name,
       pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT' AS is_default,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']*)''\\)'))[1]::timestamptz
           AS lower,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']*)''\\)'))[1]::timestamptz
           AS upper
FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = 'inbox'::regclass
ORDER BY upper NULLS LAST
""")
"""Every partition of ``inbox`` with its range (``MINVALUE``/``MAXVALUE``: ``NULL``), oldest
first, the default last. The bounds are read back in the session's own time zone."""

"""``'p'`` for a partitioned inbox."""

LEFTOVERS = text(
    "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition"
    " AND relname ~ '^inbox_(legacy|default|w[0-9]{8})_retired$'"
)
"""Partitions detached by a retirement whose ``DROP`` did not get its lock."""

WEEK = text("SELECT consumer_inbox_week(:now)")
"""The Monday 00:00 UTC starting ``now``'s week (migration ``0014_inbox_placed``)."""

LOCK_TIMEOUT = "100ms"
KEPT_ARRIVED = "55006"
"""``object_in_use``: under the inbox's lock, the partition turned out to hold a row retention
keeps."""
NO_SEQSCAN = locked_steps.NO_SEQSCAN


def partition(name: str) -> TableClause:
    """One partition, with the parent's columns."""
    return table(name, *(column(c.name, c.type) for c in inbox.c))


def kept(part: TableClause, cutoff: datetime) -> ColumnElement[bool]:
    """Rows of ``part`` that ``Inbox.purge`` would not delete at ``cutoff`` (``IS NOT TRUE``: a
    row for which the rule is unknown is not deleted either)."""
    expired = queries.purged(cutoff, None).whereclause
    assert expired is not None
    return _on(part, expired).is_not(true())


def _on(part: TableClause, clause: ColumnElement[Any]) -> ColumnElement[Any]:
    """``clause``, written on ``inbox``'s columns, reading ``part``'s instead."""

    def swap(element: Any, **_: Any) -> ColumnClause[Any] | None:
        if isinstance(element, ColumnClause) and element.table is inbox:
            return part.c[element.name]
        return None

    return replacement_traverse(clause, {}, swap)


def _kept_running(part: TableClause, cutoff: datetime) -> list[ColumnElement[bool]]:
    return [part.c.status == Status.RUNNING, kept(part, cutoff)]


def _kept_at_rest(part: TableClause, cutoff: datetime) -> list[ColumnElement[bool]]:
    """Rows at rest that retention keeps, found through the status index: a failed row is kept
    for its ``updated_at``, a final row for its ``finished_at``, which every writer (the finish,
    the re-drive's burial) stamps together with ``updated_at``. A final row without
    ``finished_at``, which no writer leaves, is the one the chunked purge kept forever and the
    week's retirement drops."""
    return [part.c.status.in_(AT_REST), part.c.updated_at >= cutoff, kept(part, cutoff)]


def surveyed(part: TableClause, cutoff: datetime) -> Select[int, int, float]:
    """``part``'s running rows retention keeps (they stay where they are), its other rows
    retention keeps (they are carried), and its size as ``pg_class.reltuples`` estimates it
    (``-1``: never vacuumed nor analyzed). Read through the status index: a week's rows are
    never scanned."""
    reltuples: Select[Any] = select(column("reltuples")).select_from(table("pg_class"))
    return select(
        _count(part, _kept_running(part, cutoff)),
        _count(part, _kept_at_rest(part, cutoff)),
        reltuples.where(column("oid") == func.to_regclass(part.name)).scalar_subquery(),
    )


def _count(part: TableClause, where: list[ColumnElement[bool]]) -> Any:
    return select(func.count()).select_from(part).where(*where).scalar_subquery()


def any_row(part: TableClause) -> Select[Any]:
    return select(exists().select_from(part))


def counted(part: TableClause) -> Select[int]:
    """The rows of a partition ``pg_class`` has no estimate for (one young enough to be small)."""
    return select(func.count()).select_from(part)


def carried(part: TableClause, cutoff: datetime, now: datetime, batch: int) -> Update:
    """Up to ``batch`` rows of ``part`` that retention keeps and that are not running, moved to
    ``now``'s week, each under its key's advisory lock (the claim's), skipping keys another
    transaction holds.

    The rows are picked first and locked after, each step ``MATERIALIZED``: as a filter beside
    the others the lock would be taken in whatever order the planner ranks the filters, on
    every row a scan meets. The update rechecks the row (a claim may have changed it since the
    statement's snapshot), and a running row is never moved: its finish names its partition."""
    week = func.consumer_inbox_week(bindparam("now", now, type_=inbox.c.placed_at.type))
    pick = (
        select(part.c.key, part.c.placed_at)
        .where(*_kept_at_rest(part, cutoff), part.c.placed_at != week)
        .limit(batch)
        .cte("pick")
        .prefix_with("MATERIALIZED")
    )
    locked = (
        select(pick.c.key, pick.c.placed_at)
        .where(func.pg_try_advisory_xact_lock(func.hashtextextended(pick.c.key, 0)))
        .cte("locked")
        .prefix_with("MATERIALIZED")
    )
    return (
        update(inbox)
        .where(inbox.c.key == locked.c.key, inbox.c.placed_at == locked.c.placed_at)
        .where(inbox.c.status != Status.RUNNING, kept(inbox, cutoff))
        .values(placed_at=week)
    )


def kept_since(part: TableClause, cutoff: datetime) -> Select[Any]:
    """Under the inbox's lock: whether a row retention keeps arrived in ``part`` since the survey
    (a claim's take-over, a finish, a replay)."""
    return select(
        or_(_any(part, *_kept_running(part, cutoff)), _any(part, *_kept_at_rest(part, cutoff)))
    )


def _any(part: TableClause, *where: ColumnElement[bool]) -> Exists:
    return exists().select_from(part).where(*where)


def held_by_default(lower: datetime, upper: datetime) -> Select[Any]:
    """Whether the default partition holds rows placed in ``[lower, upper)``: a partition for that
    range cannot be made until they leave."""
    part = partition("inbox_default")
    return select(_any(part, part.c.placed_at >= lower, part.c.placed_at < upper))


def locked(*statements: str) -> str:
    """``statements`` as one ``DO`` block under ``LOCK_TIMEOUT`` (``consumer.db.locked.block``)."""
    return locked_steps.block(LOCK_TIMEOUT, *statements)


def made(name: str, lower: datetime, upper: datetime) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of the week partition ``name``."""
    return locked(
        f'CREATE TABLE IF NOT EXISTS "{name}" PARTITION OF inbox '
        f"FOR VALUES FROM ('{lower.isoformat()}') TO ('{upper.isoformat()}')"
    )


def detached(name: str, cutoff: datetime, is_default: bool) -> str:
    """Under the inbox's lock, checked again for rows retention keeps (``KEPT_ARRIVED``), out of
    the inbox and renamed ``<name>_retired`` (a ``DROP`` that fails finds it next time); the
    default partition made again at once, so no claim ever finds none."""
    check = _literal(kept_since(partition(name), cutoff))
    statements = [
        "LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE",
        "PERFORM set_config('enable_seqscan', 'off', true)",
        f"IF ({check}) THEN RAISE EXCEPTION 'inbox partition {name} holds rows retention keeps' "
        f"USING ERRCODE = '{KEPT_ARRIVED}'; END IF",
        f'ALTER TABLE inbox DETACH PARTITION "{name}"',
        f'ALTER TABLE "{name}" RENAME TO "{name}{RETIRED}"',
    ]
    if is_default:
        statements.append("CREATE TABLE inbox_default PARTITION OF inbox DEFAULT")
    return locked(*statements)


def _literal(statement: Select[Any]) -> str:
    """``statement`` with its values written in, for a ``DO`` block (which takes none bound)."""
    literal = {"literal_binds": True}
    return str(statement.compile(dialect=postgresql.dialect(), compile_kwargs=literal))
