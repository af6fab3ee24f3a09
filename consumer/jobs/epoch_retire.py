"""Retention of PostgreSQL's jobs table by epoch (migration ``0016_jobs_epochs``): an epoch before
the current one whose jobs all finished before the retention's cutoff is detached and dropped
whole, instead of deleted row by row (hundreds of bytes of WAL a row, bench/jobs_retire.py).

No transaction inserts into an epoch once a later one is current (``consumer.jobs.epochs``), so
an earlier epoch only loses jobs, except one: an operator's retry revives a finished job where
it is. The survey is therefore checked again under ``ACCESS EXCLUSIVE`` on ``jobs``, in the
``DO`` block that detaches the partition, through the partition's indexes only (the lock is
held for milliseconds); a lock not granted leaves the epoch for the next run.

An epoch that ended before the cutoff but that a few unfinished jobs hold (one pending far in
the future, a lease nobody comes back for) is ``stuck``: its finished jobs past retention go in
chunks (``JobStore.purge`` restricted to it). An epoch that ended since is never chunk-deleted:
its jobs would leave one by one just before the whole partition could go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from consumer.db import locked
from consumer.db.engine import sqlstate
from consumer.jobs import epoch_queries as q
from consumer.jobs import epochs

UNDEFINED_TABLE = "42P01"
LOCK_NOT_GRANTED = f"lock not granted in {epochs.LOCK_TRIES} x {q.LOCK_TIMEOUT}"
REVIVED = "a job retention keeps arrived before the lock (a retry revived one)"
GONE = "gone: another run retired it"


@dataclass(frozen=True)
class EpochPartition:
    name: str
    epoch: int
    ended_at: datetime


@dataclass
class Retired:
    """What ``retire`` did. ``rows``: the jobs the dropped partitions held, as
    ``pg_class.reltuples`` estimated them before the lock that detached them (counted for a
    partition that has no estimate). ``skipped``: the epochs that ended before the cutoff and
    were not dropped, with why. ``stuck``: those of them unfinished jobs hold, whose finished
    jobs past retention the caller deletes in chunks."""

    dropped: list[str] = field(default_factory=list)
    rows: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    stuck: list[int] = field(default_factory=list)
    more: bool = False
    """Stopped before every epoch was tried (``stop`` said so)."""


def retire(engine: Engine, cutoff: datetime, stop: Callable[[], bool] = lambda: False) -> Retired:
    """Drop every epoch before the current one whose jobs all finished before ``cutoff``, oldest
    first. ``stop`` is asked between epochs (the task's budget), after the first."""
    result = Retired()
    _drop_leftovers(engine, result)
    for index, part in enumerate(partitions(engine)):
        if index and stop():  # at least one, however short the budget
            result.more = True
            break
        _retire_one(engine, part, cutoff, result)
    return result


def partitions(engine: Engine) -> list[EpochPartition]:
    """The partitions of the epochs before the current one, oldest first."""
    with engine.connect() as connection:
        rows = connection.execute(q.LISTED).all()
    return [EpochPartition(row.name, int(row.epoch), row.ended_at) for row in rows]


def _retire_one(engine: Engine, part: EpochPartition, cutoff: datetime, result: Retired) -> None:
    ended = part.ended_at < cutoff
    unfinished, recent, rows = _survey(engine, part.name, cutoff)
    reason = _held(unfinished, recent)
    if reason is None:
        reason = _detach(engine, part.name, cutoff)
        if reason is None:
            result.dropped.append(part.name)
            result.rows += rows
            _drop(engine, [part.name + q.RETIRED], result)
            return
    if ended:  # due, and not dropped: the caller hears why
        result.skipped[part.name] = reason
        if reason not in (LOCK_NOT_GRANTED, GONE):
            result.stuck.append(part.epoch)


def _survey(engine: Engine, name: str, cutoff: datetime) -> tuple[int, int, int]:
    """``(unfinished jobs, jobs finished since the cutoff, jobs)``; the counts capped, the jobs
    as ``pg_class.reltuples`` estimates them, counted when it has no estimate."""
    with engine.begin() as connection:
        connection.execute(locked.NO_SEQSCAN)
        row = connection.execute(text(q.surveyed(name)), {"cutoff": cutoff}).one()
    estimate = row.estimate
    if estimate is None or estimate < 0:
        with engine.connect() as connection:
            estimate = connection.execute(text(q.counted(name))).scalar_one()
    return int(row.unfinished), int(row.recent), round(estimate)


def _held(unfinished: int, recent: int) -> str | None:
    if unfinished:
        return f"holds {_at_least(unfinished)} unfinished job(s)"
    if recent:
        return f"holds {_at_least(recent)} job(s) finished since the cutoff"
    return None


def _at_least(count: int) -> str:
    return f"{count}+" if count >= q.SURVEY_CAP else str(count)


def _detach(engine: Engine, name: str, cutoff: datetime) -> str | None:
    """Detach ``name`` under the jobs' lock, checked empty of jobs retention keeps; why not, or
    ``None``."""
    try:
        if not epochs.tried(engine, q.detached(name, cutoff)):
            return LOCK_NOT_GRANTED
    except OperationalError as exc:
        if sqlstate(exc) != q.KEPT_ARRIVED:
            raise
        return REVIVED
    except ProgrammingError as exc:
        if sqlstate(exc) != UNDEFINED_TABLE:
            raise
        return GONE
    return None


def _drop(engine: Engine, names: list[str], result: Retired) -> None:
    tries, rest = epochs.LOCK_TRIES, epochs.LOCK_REST_SECONDS
    result.skipped.update(locked.dropped(engine, names, q.LOCK_TIMEOUT, tries, rest))


def _drop_leftovers(engine: Engine, result: Retired) -> None:
    """Partitions an earlier run detached but could not drop (their jobs were counted then)."""
    with engine.connect() as connection:
        leftovers = list(connection.execute(q.LEFTOVERS).scalars())
    _drop(engine, leftovers, result)
