"""Retention of PostgreSQL's inbox by week partitions (migration ``0015_inbox_partitions``): weeks
made ahead (``make_ahead``), and a week whose rows are past retention dropped whole (``retire``)
instead of deleted row by row, which wrote up to 740 bytes of WAL a row and slowed the pushes
beside it (docs/capacity.md).

Every step that locks the inbox is one ``DO`` block, a transaction and a round trip of its own,
under ``lock_timeout``: a lock not granted in time leaves the step for a later try or the next
run, never a failed task and never a queue of pushes waiting long behind it. A running row never
changes partition (its finish updates the partition its claim found it in): rows retention
keeps are carried out of a week only at rest, under their key's advisory lock, the one
``consumer_inbox_claim`` takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, TableClause
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from consumer.db import locked
from consumer.db.engine import sqlstate
from consumer.db.partitioned import partitioned as table_partitioned
from consumer.inbox import partition_queries as q

WEEK = timedelta(days=7)
WEEKS_AHEAD = 4
LOCK_TRIES = 3
"""A lock not granted in ``partition_queries.LOCK_TIMEOUT`` is asked for again this many times
in all, a short rest apart, then left for the next run."""
LOCK_REST_SECONDS = 0.05
CARRY_BATCH = 500
"""Rows carried in one statement: advisory locks held at once, and the longest a claim of one
of those keys waits."""
DUPLICATE_TABLE = "42P07"
UNDEFINED_TABLE = "42P01"
DEFAULT = "inbox_default"
LOCK_NOT_GRANTED = f"lock not granted in {LOCK_TRIES} x {q.LOCK_TIMEOUT}"


@dataclass(frozen=True)
class Partition:
    name: str
    lower: datetime | None
    """``None``: from ``MINVALUE`` (``inbox_legacy``), or the default partition."""
    upper: datetime | None
    is_default: bool


@dataclass
class Made:
    """What ``make_ahead`` did: weeks made, and weeks it could not make, with why."""

    made: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class Retired:
    """What ``retire`` did. ``rows``: the rows the dropped partitions held, as
    ``pg_class.reltuples`` estimated them before the lock that detached them (from the last
    vacuum or analyze; counted for a partition that never had one)."""

    dropped: list[str] = field(default_factory=list)
    rows: int = 0
    carried: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    more: bool = False
    """Stopped before every candidate was tried (``stop`` said so)."""


class LockNotGranted(Exception):
    """A step's lock was not granted in ``LOCK_TIMEOUT``, ``LOCK_TRIES`` times over."""


def partitioned(engine: Engine) -> bool:
    """Whether ``engine``'s inbox is a partitioned table."""
    return table_partitioned(engine, "inbox")


def partitions(connection: Connection) -> list[Partition]:
    """The inbox's partitions, oldest first, the default last."""
    rows = connection.execute(q.LISTED).all()
    return [Partition(row.name, row.lower, row.upper, row.is_default) for row in rows]


def make_ahead(engine: Engine, now: datetime, weeks: int = WEEKS_AHEAD) -> Made:
    """The partitions of ``now``'s week and the ``weeks`` after it, those missing made. A week
    inside another partition's range (``inbox_legacy``'s first weeks) is left to it; one whose
    rows the default partition holds cannot be made until ``retire`` carries them out of it."""
    result = Made()
    if not partitioned(engine):
        return result
    with engine.connect() as connection:
        first = connection.execute(q.WEEK, {"now": now}).scalar_one()
        existing = partitions(connection)
    for monday in (first + WEEK * n for n in range(weeks + 1)):
        name = f"inbox_w{monday:%Y%m%d}"
        reason = _unmakeable(engine, existing, name, monday)
        if reason is None:
            reason = _make(engine, name, monday)
            if reason is None:
                result.made.append(name)
        if reason:
            result.skipped[name] = reason
    return result


def _unmakeable(
    engine: Engine, existing: list[Partition], name: str, monday: datetime
) -> str | None:
    """Why the week cannot be made (``""``: it exists), or ``None``."""
    for part in existing:
        if part.name == name:
            return ""
        if not part.is_default and _overlaps(part, monday, monday + WEEK):
            return f"inside {part.name}'s range"
    if any(part.is_default for part in existing):
        with engine.connect() as connection:
            if connection.execute(q.held_by_default(monday, monday + WEEK)).scalar():
                return f"{DEFAULT} holds rows of this week"
    return None


def _overlaps(part: Partition, lower: datetime, upper: datetime) -> bool:
    return (part.lower is None or part.lower < upper) and (part.upper is None or lower < part.upper)


def _make(engine: Engine, name: str, monday: datetime) -> str | None:
    """Make the week; why not, or ``None``."""
    try:
        _locked(engine, q.made(name, monday, monday + WEEK))
    except LockNotGranted:
        return LOCK_NOT_GRANTED
    except IntegrityError:  # the default took rows of the week since the look
        return f"{DEFAULT} holds rows of this week"
    except ProgrammingError as exc:  # another run made it since the look
        if sqlstate(exc) != DUPLICATE_TABLE:
            raise
    return None


def _locked(engine: Engine, block: str) -> None:
    """A ``partition_queries.locked`` block, alone in autocommit, tried ``LOCK_TRIES`` times."""
    if not locked.tried(engine, block, LOCK_TRIES, LOCK_REST_SECONDS):
        raise LockNotGranted()


def retire(
    engine: Engine, cutoff: datetime, now: datetime, stop: Callable[[], bool] = lambda: False
) -> Retired:
    """Drop every partition whose rows are all past retention at ``cutoff``: the weeks (and
    ``inbox_legacy``) that end by then, and the default partition when it holds rows. What
    retention keeps of them is carried to ``now``'s week first, except running rows, which are
    waited for. ``stop`` is asked between steps (the task's budget), after the first."""
    result = Retired()
    if not partitioned(engine):
        return result
    _drop_leftovers(engine, result)
    with engine.connect() as connection:
        candidates = [part for part in partitions(connection) if _candidate(part, cutoff)]
    for index, part in enumerate(candidates):
        if index and stop():  # at least one, however short the budget
            result.more = True
            break
        _retire_one(engine, part, cutoff, now, stop, result)
    return result


def _candidate(part: Partition, cutoff: datetime) -> bool:
    return part.is_default or (part.upper is not None and part.upper <= cutoff)


def _retire_one(
    engine: Engine,
    part: Partition,
    cutoff: datetime,
    now: datetime,
    stop: Callable[[], bool],
    result: Retired,
) -> None:
    table = q.partition(part.name)
    if part.is_default and not _holds_rows(engine, table):
        return  # nothing to drop: the default stays as it is
    running, at_rest, rows = _survey(engine, table, cutoff)
    if at_rest:
        result.carried += _carry(engine, table, cutoff, now, stop)
        running, at_rest, rows = _survey(engine, table, cutoff)
        result.more = result.more or (at_rest > 0 and stop())  # the budget ran out mid-carry
    reason = _waiting(running, at_rest)
    if reason is None:
        reason = _detach(engine, part, cutoff)
    if reason is not None:
        result.skipped[part.name] = reason
        return
    result.dropped.append(part.name)
    result.rows += rows
    _drop(engine, [part.name + q.RETIRED], result)


def _holds_rows(engine: Engine, table: TableClause) -> bool:
    with engine.connect() as connection:
        return bool(connection.execute(q.any_row(table)).scalar())


def _survey(engine: Engine, table: TableClause, cutoff: datetime) -> tuple[int, int, int]:
    """``(running rows retention keeps, other rows retention keeps, rows)``; the rows as
    ``pg_class.reltuples`` estimates them, counted when it has no estimate."""
    with engine.begin() as connection:
        connection.execute(q.NO_SEQSCAN)
        running, at_rest, estimate = connection.execute(q.surveyed(table, cutoff)).one()
    if estimate is None or estimate < 0:
        with engine.connect() as connection:
            estimate = connection.execute(q.counted(table)).scalar_one()
    return int(running), int(at_rest), round(estimate)


def _carry(
    engine: Engine, table: TableClause, cutoff: datetime, now: datetime, stop: Callable[[], bool]
) -> int:
    """Carry batch after batch (at least one), each its own transaction, until one moves
    nothing or ``stop`` says so."""
    statement = q.carried(table, cutoff, now, CARRY_BATCH)
    carried, moved = 0, 1
    while moved and not (carried and stop()):
        with engine.begin() as connection:
            moved = connection.execute(statement).rowcount
        carried += moved
    return carried


def _waiting(running: int, at_rest: int) -> str | None:
    if running:
        return f"waits for {running} running row(s) whose lease is not past the cutoff"
    if at_rest:
        return f"holds {at_rest} row(s) retention keeps that could not be carried yet"
    return None


def _detach(engine: Engine, part: Partition, cutoff: datetime) -> str | None:
    """Detach ``part`` under the inbox's lock, checked empty of rows retention keeps there; the
    default is made again in the same transaction. Why not, or ``None``."""
    try:
        _locked(engine, q.detached(part.name, cutoff, part.is_default))
    except LockNotGranted:
        return LOCK_NOT_GRANTED
    except OperationalError as exc:
        if sqlstate(exc) != q.KEPT_ARRIVED:
            raise
        return "a row retention keeps arrived before the lock"
    except ProgrammingError as exc:
        if sqlstate(exc) != UNDEFINED_TABLE:
            raise
        return "gone: another run retired it"
    return None


def _drop(engine: Engine, names: list[str], result: Retired) -> None:
    left = locked.dropped(engine, names, q.LOCK_TIMEOUT, LOCK_TRIES, LOCK_REST_SECONDS)
    result.skipped.update(left)


def _drop_leftovers(engine: Engine, result: Retired) -> None:
    """Partitions an earlier run detached but could not drop (their rows were counted then)."""
    with engine.connect() as connection:
        _drop(engine, list(connection.execute(q.LEFTOVERS).scalars()), result)
