"""``JobStore``'s statements on the ``jobs`` table, each named once (the bulk enqueue's are
``consumer.jobs.bulk_queries``, the flow control's ``consumer.jobs.flow``).

The claim differs by dialect (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a guarded ``UPDATE``
under SQLite's single writer); every write after it is guarded by ``claimed_by`` and
``status = 'running'``: zero rows means the lease was lost, and nothing is overwritten.

The sweep's statements are built once per dialect, with bind parameters: SQLAlchemy reuses their
cache keys and compiled forms, and psycopg prepares them server-side after a few runs.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    false,
    func,
    literal_column,
    or_,
    select,
    true,
    update,
)

from consumer.db import dialect as sql
from consumer.db.types import UTCDateTime
from consumer.jobs.flow import HEAD_OF_KEY
from consumer.jobs.model import Status
from consumer.jobs.picked import picked_postgresql, picked_sqlite
from consumer.jobs.schema import PENDING_DEBOUNCED, TURN, JobId, epoch_column, jobs


def claimed(dialect: str) -> tuple[Any, ...]:
    """What a claim returns, in ``model.claimed_jobs`` order. On PostgreSQL the payload comes as
    its JSON text, and ``claimed_jobs`` decodes a claim's payloads in one call: the driver's
    JSON loader costs a call of ``json.loads`` per row, about as much as the rest of the row."""
    payload = (
        cast(jobs.c.payload, Text()).label("payload")
        if dialect == sql.POSTGRESQL
        else jobs.c.payload
    )
    return (
        jobs.c.id, jobs.c.kind, payload, jobs.c.priority, jobs.c.run_at, jobs.c.attempts,
        jobs.c.max_attempts, jobs.c.idempotency_key, jobs.c.created_at, jobs.c.errors,
        jobs.c.trace_parent, jobs.c.group_key, jobs.c.fair_at,
    )  # fmt: skip


NOW = bindparam("now", type_=UTCDateTime())
TOKEN = bindparam("token", type_=String())
LIMIT = bindparam("limit", type_=Integer())
LEASE = bindparam("lease", type_=UTCDateTime())
OWNED = and_(jobs.c.claimed_by == TOKEN, jobs.c.status == Status.RUNNING.value)
"""Rows the claim ``token`` still holds: every write after a claim says this."""
CANCEL_ASKED = jobs.c.cancel_requested_at.is_not(None)
CANCELLED = literal_column("'cancelled'", String())
"""Inlined, not bound: the ``done`` write is a prepared statement with a fixed parameter list."""


_LATER = jobs.alias("later")
SUPERSEDED = and_(
    jobs.c.debounce_key.is_not(None),
    exists().where(
        _LATER.c.debounce_key == jobs.c.debounce_key,
        _LATER.c.status == literal_column("'pending'"),
        _LATER.c.id != jobs.c.id,
    ),
)
"""A debounced job that a later job of its debounce key stands for: enqueued while this one ran,
pending, with the later payload. Back to ``pending`` the two would be one key's two pending
jobs, which the unique index refuses (the sweep's write failed, its batch unrecorded); this one
ends ``cancelled`` instead and the later one runs, as graphile-worker retires a running job
whose key a new job took."""
NEW_STATUS = bindparam("new_status", type_=String())
RETRIED = and_(literal_column("'pending'", String()) == NEW_STATUS, SUPERSEDED)
"""A failure written back to ``pending`` whose debounce key a later pending job holds."""


def unless_cancelled(status: Any, superseded: Any = None) -> Any:
    """``status``, or ``cancelled`` for a job an operator asked to cancel while it ran: however
    its run ends (done, failed, released), it is never retried (docs/long-running-jobs.md);
    ``cancelled`` too where ``superseded`` holds (``SUPERSEDED``, ``RETRIED``)."""
    whens = [(CANCEL_ASKED, CANCELLED)]
    if superseded is not None:
        whens.append((superseded, CANCELLED))
    return case(*whens, else_=status)


def finished_unless_cancelled(finished_at: Any, superseded: Any = None) -> Any:
    whens = [(CANCEL_ASKED, NOW)]
    if superseded is not None:
        whens.append((superseded, NOW))
    return case(*whens, else_=finished_at)


@cache
def enqueue(dialect: str) -> Any:
    """New jobs (one row, or many as an executemany), returning the ids of those inserted: a row
    whose idempotency key is taken is skipped, and the unique index decides, so concurrent
    callers cannot both insert it."""
    return sql.insert_ignore(jobs, dialect).returning(jobs.c.id)


@cache
def debounced(dialect: str) -> Any:
    """A debounced job: a new one, or the pending job of its debounce key, given the latest
    payload and put off to the new ``run_at`` (now + the quiet window), never past its
    ``debounce_until`` (the first enqueue + the longest wait). The unique partial index on the
    pending jobs' debounce keys decides, so concurrent enqueues fold into one job (on PostgreSQL
    the current epoch's: migration ``0016_jobs_epochs`` folds it into an earlier epoch's)."""
    statement = sql.insert(jobs, dialect)
    new = statement.excluded
    later = case((new.run_at < jobs.c.debounce_until, new.run_at), else_=jobs.c.debounce_until)
    return statement.on_conflict_do_update(
        index_elements=[jobs.c.debounce_key, *epoch_column(dialect)],
        index_where=PENDING_DEBOUNCED,  # literal, as the index's: a prepared one still infers it
        set_={"payload": new.payload, "run_at": later, "updated_at": new.updated_at,
              "trace_parent": new.trace_parent},
    ).returning(jobs.c.id)  # fmt: skip


def id_of_key(key: str | None) -> Select[Any]:
    """The id of the job holding an idempotency key (the one an ignored insert collided with)."""
    return select(jobs.c.id).where(jobs.c.idempotency_key == key)


def id_of_debounced(key: str) -> Select[Any]:
    """The pending job of a debounce key (one an earlier epoch's row took the enqueue into)."""
    return select(jobs.c.id).where(jobs.c.debounce_key == key, jobs.c.status == "pending")


# --- the sweep: claim, then guarded writes -------------------------------------------------------


@cache
def claim(dialect: str, excluding: bool = False) -> Any:
    """Up to ``:limit`` jobs of ``:kinds``: leases that expired first, then due pending jobs
    (``excluding``: none of the groups ``:excluded``, those a group limit holds back)."""
    expired, due = _candidates(dialect)
    if excluding:
        among = sql.among(jobs.c.group_key, "excluded", dialect, Text())
        due = due.where(or_(jobs.c.group_key.is_(None), ~among))
    picked = (picked_postgresql if dialect == sql.POSTGRESQL else picked_sqlite)(
        expired, due, LIMIT
    )
    claimable = case(  # re-checked in the UPDATE: a row another claim took is left alone
        (jobs.c.status == Status.PENDING.value, true()),
        (jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < NOW),
        else_=false(),
    )  # a CASE, which no partial index's predicate matches: the update reads the picked ids
    return (
        update(jobs)
        .where(picked, claimable)
        .values(
            status=Status.RUNNING.value, attempts=jobs.c.attempts + 1, claimed_by=TOKEN,
            lease_until=LEASE, updated_at=NOW,
        )
        .returning(*claimed(dialect))
    )  # fmt: skip


def _candidates(dialect: str) -> tuple[Select[Any], Select[Any]]:
    """Running jobs whose lease expired (their sweeper died), and due pending jobs in order (of
    a lock key, only its first unfinished job). The order is by turn after priority: a grouped
    job's ``fair_at`` (set on insert, migration ``0012_job_groups``: a group's backlog is spread
    out, so other groups' jobs come in between), an ungrouped job's ``run_at``."""
    kind = sql.among(jobs.c.kind, "kinds", dialect)
    expired = select(jobs.c.id).where(
        jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < NOW, kind
    )
    due = (
        select(jobs.c.id)
        .where(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= NOW, kind, HEAD_OF_KEY)
        .order_by(jobs.c.priority.desc(), TURN, jobs.c.id)
    )
    return expired, due


def _ids(dialect: str) -> Any:
    return sql.among(jobs.c.id, "ids", dialect, BigInteger())


@cache
def done(dialect: str) -> Any:
    """The jobs ``:ids`` of the claim ``:token`` ran: ``done``."""
    return (
        update(jobs)
        .where(_ids(dialect), OWNED)
        .values(
            status=unless_cancelled(literal_column("'done'", String())), lease_until=None,
            updated_at=NOW, finished_at=NOW,
        )
    )  # fmt: skip


@cache
def released(dialect: str) -> Any:
    """Claimed but not run for lack of time: the claim was not an attempt (``cancelled`` if a later
    job of its debounce key is pending)."""
    return (
        update(jobs)
        .where(_ids(dialect), OWNED)
        .values(
            status=unless_cancelled(literal_column("'pending'", String()), SUPERSEDED),
            attempts=jobs.c.attempts - 1, lease_until=None, claimed_by=None, updated_at=NOW,
            finished_at=finished_unless_cancelled(None, SUPERSEDED),
        )
    )  # fmt: skip


RENEW = (
    update(jobs)
    .where(OWNED)
    .values(lease_until=case((jobs.c.lease_until > LEASE, jobs.c.lease_until), else_=LEASE))
    .returning(jobs.c.id, jobs.c.cancel_requested_at)
)
"""Push a live sweeper's lease forward: only rows it still owns (a taken-over job stays with its
new owner), never shortening a longer lease (a job held for its target's reports), and say
which of them an operator asked to cancel."""


@cache
def held(dialect: str) -> Any:
    """Jobs ``:ids`` whose target answered 202: still running under the claim, until ``:lease``
    (each of the target's heartbeats pushes it on)."""
    return update(jobs).where(_ids(dialect), OWNED).values(lease_until=LEASE, updated_at=NOW)


FAILED = (
    update(jobs)
    .where(jobs.c.id == bindparam("job_id", type_=JobId), OWNED)
    .values(
        status=unless_cancelled(NEW_STATUS, RETRIED),
        run_at=bindparam("new_run_at", type_=UTCDateTime()),
        last_error=bindparam("error", type_=Text()),
        errors=bindparam("history", type_=jobs.c.errors.type),
        finished_at=finished_unless_cancelled(
            bindparam("new_finished_at", type_=UTCDateTime()), RETRIED
        ),
        lease_until=None,
        updated_at=NOW,
    )
)
"""One failed run: back to ``pending`` at ``:new_run_at``, or ``dead``, with its error
(``cancelled`` if an operator asked while it ran, or if a later job of its debounce key is
pending)."""


def oldest_due(now: datetime) -> Select[Any]:
    """The ``run_at`` of the longest-waiting due pending job (NULL: none is due)."""
    return select(func.min(jobs.c.run_at)).where(
        jobs.c.status == Status.PENDING.value, jobs.c.run_at <= now
    )


def oldest_expired_lease(now: datetime) -> Select[Any]:
    """The earliest lease that ran out on a running job (its sweeper died; NULL: none)."""
    return select(func.min(jobs.c.lease_until)).where(
        jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now
    )


def due_by_kind(now: datetime) -> Select[Any]:
    """Pending jobs whose time has come, plus expired leases, counted by kind."""
    return (
        select(jobs.c.kind, func.count())
        .where(
            or_(
                and_(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= now),
                and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now),
            )
        )
        .group_by(jobs.c.kind)
    )
