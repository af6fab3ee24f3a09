"""The operator's statements on the ``jobs`` table: inspect, retry, cancel, purge
(``consumer.jobs.operations``); the sweep's are ``consumer.jobs.queries``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Delete, Select, Update, and_, literal_column, select, update

from consumer.db import dialect as sql
from consumer.jobs.model import FINISHED, Status
from consumer.jobs.queries import SUPERSEDED
from consumer.jobs.schema import jobs


def listed(status: Status | None, kind: str | None, limit: int) -> Select[Any]:
    """Newest first."""
    query = select(jobs).order_by(jobs.c.id.desc()).limit(limit)
    if status is not None:
        query = query.where(jobs.c.status == status.value)
    if kind is not None:
        query = query.where(jobs.c.kind == kind)
    return query


def by_id(job_id: int) -> Select[Any]:
    """The whole row of one job."""
    return select(jobs).where(jobs.c.id == job_id)


def retried(now: datetime, job_id: int | None) -> Update:
    """One dead or cancelled job (or, with no id, every dead job), revived."""
    if job_id is None:
        return revived(now).where(jobs.c.status == Status.DEAD.value)
    retriable = [Status.DEAD.value, Status.CANCELLED.value]
    return revived(now).where(jobs.c.id == job_id, jobs.c.status.in_(retriable))


def retried_dead_of_kind(now: datetime, kind: str) -> Update:
    """Every dead job of one kind, revived."""
    return revived(now).where(jobs.c.status == Status.DEAD.value, jobs.c.kind == kind)


def revived(now: datetime) -> Update:
    """Pending again with fresh attempts; the error history is kept. Callers say which rows. Not
    a debounced job whose key a later pending job holds: the two would be one key's two pending
    jobs (the unique index refuses it), and the later one already runs with the later payload."""
    return (
        update(jobs)
        .where(~SUPERSEDED)
        .values(
            status=Status.PENDING.value,
            attempts=0,
            run_at=now,
            lease_until=None,
            claimed_by=None,
            updated_at=now,
            finished_at=None,
            cancel_requested_at=None,  # a cancelled job retried runs: the old request is spent
            result=None,
        )
    )


def cancelled(job_id: int, now: datetime) -> Update:
    """A pending job, cancelled (a running one cannot be stopped mid-effect: its cancel is
    requested, ``cancel_requested``)."""
    return (
        update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status == Status.PENDING.value)
        .values(status=Status.CANCELLED.value, updated_at=now, finished_at=now)
    )


def purged(
    finished_before: datetime, limit: int | None, epochs: Sequence[int] | None = None
) -> Delete:
    """Finished jobs past the retention, at most ``limit`` of them; with ``epochs``, only those
    epochs' (PostgreSQL's jobs by epoch: the ones their unfinished jobs keep from retiring,
    ``consumer.jobs.epoch_retire``), named in the chunk and in the delete so both are pruned to
    those partitions."""
    expired = and_(
        jobs.c.finished_at < finished_before, jobs.c.status.in_([s.value for s in FINISHED])
    )
    if epochs is None:
        return sql.purge(jobs, jobs.c.id, expired, limit)
    among = literal_column("epoch").in_(list(epochs))
    return sql.purge(jobs, jobs.c.id, and_(expired, among), limit).where(among)
