"""The flow-control statements (``consumer.jobs.flow_store`` runs the claim's, ``consumer.jobs.
flow_admin`` the operator's): the ``job_flow`` row a limited kind's claims lock, the running
jobs a cap counts, the rate's theoretical arrival time, and the lock keys' queue order."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal_column,
    or_,
    select,
    update,
)

from consumer.db import dialect as sql
from consumer.db.types import UTCDateTime
from consumer.jobs.model import Status
from consumer.jobs.schema import job_flow, job_flow_shard, jobs

KIND = bindparam("flow_kind", type_=String())
NOW = bindparam("now", type_=UTCDateTime())

_EARLIER = jobs.alias("earlier")
HEAD_OF_KEY = or_(
    jobs.c.lock_key.is_(None),
    ~exists().where(
        _EARLIER.c.lock_key == jobs.c.lock_key,
        _EARLIER.c.id < jobs.c.id,
        _EARLIER.c.status.in_([literal_column("'pending'"), literal_column("'running'")]),
    ),
)
"""A job without a lock key, or the first unfinished job of its key: a later one waits until
every earlier one is done, dead or cancelled (literal statuses: the partial index's own)."""


@cache
def ensure_row(dialect: str) -> Any:
    """The kind's ``job_flow`` row, created if missing (a claim needs a row to lock)."""
    return sql.insert_ignore(job_flow, dialect).values(kind=KIND, updated_at=NOW)


PEEK_ROW = select(job_flow.c.limits, job_flow.c.tat).where(job_flow.c.kind == KIND)
"""The kind's row as last committed, without waiting: a glance at whether the kind has room."""
LOCK_ROW = PEEK_ROW.with_for_update()
"""The kind's row, locked to the end of the claim's transaction: the next claim of the kind waits
for this one to commit, then reads the rate state it left (and, on SQLite, where its single
writer serialises claims, counts the jobs it took)."""

RUNNING = select(func.count()).where(
    jobs.c.kind == KIND, jobs.c.status == Status.RUNNING.value, jobs.c.lease_until >= NOW
)
"""Jobs of the kind a live sweeper holds (an expired lease is a takeover's to claim)."""


SHARDS = 8
"""A capped kind's ``job_flow_shard`` rows: up to this many of its claims hold one each at once."""
FIRST_SHARD = bindparam("first_shard", type_=Integer())
LAST_SHARD = bindparam("last_shard", type_=Integer())
CAP_LOCK = select(
    job_flow.c.limits,
    job_flow.c.tat,
    func.job_flow_lock_count(KIND, FIRST_SHARD, LAST_SHARD, NOW, type_=BigInteger()),
).where(job_flow.c.kind == KIND)
"""PostgreSQL: a capped kind's row as last committed, with its shards ``first_shard`` to
``last_shard`` locked and its running jobs counted after the lock, in one round trip (the
volatile function of migration ``0008_job_flow_shards``: a plain subquery would count from the
snapshot taken before the lock was waited for). The count is ``NULL`` when the shards are
missing; there is no row when the kind's row is."""


@cache
def cap_lock(_dialect: str) -> Any:
    """``CAP_LOCK`` for ``consumer.db.prepared`` (a capped kind's every claim runs it)."""
    return CAP_LOCK


@cache
def ensure_shards(dialect: str) -> Any:
    """The kind's ``SHARDS`` shard rows, created if missing."""
    rows = [{"kind": KIND, "shard": shard} for shard in range(SHARDS)]
    return sql.insert_ignore(job_flow_shard, dialect).values(rows)


@cache
def lock_row(_dialect: str) -> Any:
    """``LOCK_ROW`` for ``consumer.db.prepared`` (a limited kind's every claim runs it)."""
    return LOCK_ROW


@cache
def running(_dialect: str) -> Any:
    """``RUNNING`` for ``consumer.db.prepared``."""
    return RUNNING


ANY_DUE = (
    select(jobs.c.id)
    .where(
        jobs.c.kind == KIND,
        or_(
            and_(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= NOW),
            and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < NOW),
        ),
    )
    .limit(1)
)
"""One claimable job of the kind, if any: was a claim that took none held back, or idle?"""

SET_TAT = (
    update(job_flow)
    .where(job_flow.c.kind == KIND)
    .values(tat=bindparam("new_tat", type_=UTCDateTime()))
)

OVERRIDES = select(job_flow.c.kind, job_flow.c.limits).where(job_flow.c.limits.is_not(None))
"""Operators' changes, by kind."""

ROWS = select(job_flow).order_by(job_flow.c.kind)


def set_limits(dialect: str, kind: str, limits: str | None, by: str, now: datetime) -> Any:
    """An operator's change of a kind (``None``: back to the configured limits)."""
    values = {"kind": kind, "limits": limits, "updated_by": by, "updated_at": now}
    return sql.upsert(
        job_flow,
        dialect,
        values,
        [job_flow.c.kind],
        lambda new: {"limits": new.limits, "updated_by": new.updated_by,
                     "updated_at": new.updated_at},
    )  # fmt: skip


def concurrency_by_kind(now: datetime) -> Select[Any]:
    """Running jobs with live leases, by kind: what a cap counts."""
    return (
        select(jobs.c.kind, func.count())
        .where(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until >= now)
        .group_by(jobs.c.kind)
    )


TOP_GROUPS = 5
"""Groups shown per kind (``consumer jobs limits``, the dashboard): the busiest, so what is
shown stays bounded however many groups there are (no metric has a label per group)."""


def busiest_groups(now: datetime) -> Select[Any]:
    """Unfinished grouped jobs by kind and group, the busiest first: running (live lease) and
    pending."""
    running = and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until >= now)
    live = func.sum(case((running, 1), else_=0))
    pending = func.sum(case((jobs.c.status == Status.PENDING.value, 1), else_=0))
    return (
        select(jobs.c.kind, jobs.c.group_key, live, pending)
        .where(jobs.c.group_key.is_not(None), jobs.c.status.in_(["pending", "running"]))
        .group_by(jobs.c.kind, jobs.c.group_key)
        .order_by(live.desc(), pending.desc(), jobs.c.group_key)
        .limit(TOP_GROUPS * 20)
    )
