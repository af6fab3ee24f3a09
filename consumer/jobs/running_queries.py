"""Statements on a job that runs past the sweep that claimed it: an operator's cancel of a running
job, and the reports of an HTTP target that answered 202 (docs/long-running-jobs.md). Every
report is guarded as the sweep's writes are: the job's id, the claim's token, ``running``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Select,
    String,
    Text,
    Update,
    and_,
    bindparam,
    case,
    func,
    select,
    update,
)

from consumer.db.types import UTCDateTime
from consumer.jobs.model import Status
from consumer.jobs.queries import (
    CANCEL_ASKED,
    NEW_STATUS,
    NOW,
    RETRIED,
    finished_unless_cancelled,
    unless_cancelled,
)
from consumer.jobs.schema import JobId, jobs

JOB = bindparam("job_id", type_=JobId)
CLAIM = bindparam("token", type_=String())
HELD = and_(jobs.c.id == JOB, jobs.c.claimed_by == CLAIM, jobs.c.status == Status.RUNNING.value)
"""The one job the report names, still under the claim the call carried."""


def lapsed_cancelled(now: datetime, job_id: int | None = None) -> Update:
    """Running jobs whose cancel was requested (or, given ``job_id``, that one job, requested or
    not) and whose lease lapsed: their holder is gone, so nothing more will run them."""
    lapsed = and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now)
    which = CANCEL_ASKED if job_id is None else jobs.c.id == job_id
    return (
        update(jobs)
        .where(lapsed, which)
        .values(
            status=Status.CANCELLED.value, lease_until=None, updated_at=now, finished_at=now,
            cancel_requested_at=func.coalesce(jobs.c.cancel_requested_at, now),
        )
    )  # fmt: skip


def cancel_requested(job_id: int, now: datetime) -> Update:
    """A running job's cancel, recorded for its heartbeat to see (the first request's time is
    kept)."""
    return (
        update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status == Status.RUNNING.value)
        .values(cancel_requested_at=func.coalesce(jobs.c.cancel_requested_at, now), updated_at=now)
    )


def status_of(job_id: int) -> Select[Any]:
    return select(jobs.c.status).where(jobs.c.id == job_id)


def row_of(job_id: int) -> Select[Any]:
    """What a report is checked against: the job's state and claim."""
    return select(
        jobs.c.status, jobs.c.claimed_by, jobs.c.kind, jobs.c.attempts, jobs.c.max_attempts,
        jobs.c.errors, jobs.c.run_at,
    ).where(jobs.c.id == job_id)  # fmt: skip


HEARTBEAT = (
    update(jobs)
    .where(HELD)
    .values(
        status=unless_cancelled(jobs.c.status),
        lease_until=case(
            (CANCEL_ASKED, None),
            (jobs.c.lease_until > bindparam("lease", type_=UTCDateTime()), jobs.c.lease_until),
            else_=bindparam("lease", type_=UTCDateTime()),
        ),
        finished_at=case((CANCEL_ASKED, NOW), else_=None),
        updated_at=NOW,
    )
    .returning(jobs.c.status)
)
"""A target's heartbeat: the lease pushed on (never shortened); a job whose cancel was
requested ends ``cancelled`` here, the target told so in the answer."""

COMPLETE = (
    update(jobs)
    .where(HELD)
    .values(
        status=unless_cancelled(NEW_STATUS, RETRIED),
        run_at=bindparam("new_run_at", type_=UTCDateTime()),
        last_error=bindparam("error", type_=Text()),
        errors=bindparam("history", type_=jobs.c.errors.type),
        result=bindparam("result", type_=JSON()),
        finished_at=finished_unless_cancelled(bindparam("new_finished_at", UTCDateTime()), RETRIED),
        lease_until=None,
        updated_at=NOW,
    )
    .returning(jobs.c.status)
)
"""A target's completion: ``done``, back to ``pending`` at ``:new_run_at``, or ``dead``
(``cancelled`` if an operator asked meanwhile, or a later job of its debounce key is pending).
Exactly once: the first to write wins, the guard leaves the second nothing to update."""
