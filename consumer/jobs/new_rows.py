"""A new job as the values of its ``jobs`` row, and ``enqueue``'s statement compiled once: shared by
the store's enqueue paths (``consumer.jobs.store``) and the enqueue bench."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam

from consumer.jobs import queries
from consumer.jobs.model import Debounce, NewJob, Status
from consumer.jobs.schema import jobs
from consumer.observe import spans

COPY_FROM = 32
"""PostgreSQL: from this many jobs ``enqueue_many`` ``COPY``-s them (``bulk.insert_new_jobs``);
fewer go as one multi-row ``INSERT``, whose single round trip costs less than the stage's three."""


def one_job(dialect: str) -> Any:
    """``enqueue``'s statement with every column ``new_row`` sets named: compiled once
    (``consumer.db.prepared``), it binds one tuple of values, not a dictionary matched to the
    table's columns on every call."""
    named = {name: bindparam(name, type_=jobs.c[name].type) for name in ENQUEUED}
    return queries.enqueue(dialect).values(named)


ENQUEUED = (
    "kind", "payload", "status", "priority", "run_at", "attempts", "max_attempts",
    "idempotency_key", "created_at", "updated_at", "lock_key", "group_key", "trace_parent",
)  # fmt: skip
"""The columns ``new_row`` gives a value."""


def new_row(job: NewJob, now: datetime) -> dict[str, Any]:
    """``job``'s row as enqueued at ``now``: pending, due at its ``run_at`` or now."""
    return {
        "kind": job.kind, "payload": job.payload, "status": Status.PENDING.value,
        "priority": job.priority, "run_at": job.run_at or now, "attempts": 0,
        "max_attempts": job.max_attempts, "idempotency_key": job.key,
        "created_at": now, "updated_at": now, "lock_key": job.lock_key,
        "group_key": job.group, "trace_parent": spans.current_traceparent(),
        **({} if job.debounce is None else debounced(job.debounce, now)),
    }  # fmt: skip


def debounced(debounce: Debounce, now: datetime) -> dict[str, Any]:
    """A debounced job's own values: due once its quiet window passes, at the latest by its
    longest wait."""
    return {
        "debounce_key": debounce.key, "run_at": now + timedelta(seconds=debounce.quiet),
        "debounce_until": now + timedelta(seconds=debounce.max_wait),
    }  # fmt: skip
