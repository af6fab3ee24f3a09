"""Job rows and requests: frozen values, a status enum, and the errors of the jobs API."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from consumer.errors import ConsumerError

MAX_KIND_LENGTH = 100
MAX_GROUP_LENGTH = 200
MAX_DEBOUNCE_SECONDS = 86_400.0
"""A day: a debounced job waits at most this long (far within any retention of finished jobs)."""
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
"""``priority`` and ``max_attempts`` are 32-bit columns: a larger value is refused here, not by
the database (PostgreSQL's error would carry the statement)."""


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


FINISHED = (Status.DONE, Status.DEAD, Status.CANCELLED)


class InvalidJob(ConsumerError, ValueError):
    """The job request is invalid."""


class UnknownKind(InvalidJob):
    """No registered plugin provides this job kind: no sweeper would ever run the job."""

    def __init__(self, unknown: Collection[str], known: Collection[str]) -> None:
        super().__init__(
            f"no registered plugin provides job kind(s) {', '.join(map(repr, sorted(unknown)))}"
            f" (known: {', '.join(sorted(known)) or 'none'}); register the kind in a plugin"
            " (CONSUMER_PLUGINS), or enqueue it anyway with allow_unknown=True (CLI: --unknown)"
        )
        self.unknown = tuple(sorted(unknown))


@dataclass(frozen=True)
class Debounce:
    """Enqueues with one ``key`` within ``quiet`` seconds of each other are one job, which runs
    once ``quiet`` seconds pass with no enqueue, or ``max_wait`` seconds after the first, with
    the latest payload (docs/flow-control.md)."""

    key: str
    quiet: float
    max_wait: float

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not 0 < len(self.key) <= MAX_GROUP_LENGTH:
            raise InvalidJob(f"a debounce key must be a string of 1..{MAX_GROUP_LENGTH} characters")
        if not 0 < self.quiet <= self.max_wait <= MAX_DEBOUNCE_SECONDS:
            raise InvalidJob(
                "a debounce needs 0 < quiet <= max_wait <= "
                f"{MAX_DEBOUNCE_SECONDS} s, got {self.quiet:g} s and {self.max_wait:g} s"
            )


@dataclass(frozen=True)
class NewJob:
    """A job to enqueue. ``key`` is its idempotency key; ``max_attempts=None`` takes the sweep's
    configured default when the job runs. Jobs sharing a ``lock_key`` run one at a time, in the
    order they were enqueued; jobs of different ``group``s (a tenant, a customer) take turns in
    the claim, and a kind may cap or rate each group (docs/flow-control.md)."""

    kind: str
    payload: Any
    key: str | None = None
    run_at: datetime | None = None
    priority: int = 0
    max_attempts: int | None = None
    lock_key: str | None = None
    group: str | None = None
    debounce: Debounce | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not 0 < len(self.kind) <= MAX_KIND_LENGTH:
            raise InvalidJob(f"kind must be a string of 1..{MAX_KIND_LENGTH} characters")
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise InvalidJob("key must be a non-empty string or None")
        if self.lock_key is not None and (not isinstance(self.lock_key, str) or not self.lock_key):
            raise InvalidJob("lock_key must be a non-empty string or None")
        if self.group is not None and not (
            isinstance(self.group, str) and 0 < len(self.group) <= MAX_GROUP_LENGTH
        ):
            raise InvalidJob(f"group must be a string of 1..{MAX_GROUP_LENGTH} characters or None")
        if self.debounce is not None and self.key is not None:
            raise InvalidJob("a debounced job takes no idempotency key: its debounce key is one")
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise InvalidJob("run_at must be an aware datetime")
        if self.max_attempts is not None and not 1 <= self.max_attempts <= INT32_MAX:
            raise InvalidJob(f"max_attempts must be 1..{INT32_MAX}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidJob("priority must be an integer")
        if not INT32_MIN <= self.priority <= INT32_MAX:
            raise InvalidJob(f"priority must be {INT32_MIN}..{INT32_MAX}")


def group_from(payload: Any, field: str | None) -> str | None:
    """A job's group from its payload's ``field`` (a kind's ``group_by``): a non-empty string or
    a whole number, as text; else none (as ``consumer_enqueue`` reads it: ``payload ->> field``)."""
    value = payload.get(field) if field is not None and isinstance(payload, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return str(value)[:MAX_GROUP_LENGTH] or None


@dataclass(frozen=True)
class EnqueueResult:
    """``inserted`` is False when a job with the same key exists; ``job_id`` is then that job's
    (or ``None`` if it was purged in the meantime)."""

    job_id: int | None
    inserted: bool

    @property
    def duplicate(self) -> bool:
        return not self.inserted


class Job(NamedTuple):
    """A job row as the sweep and the CLI see it. Immutable and typed like the dataclasses here,
    but a named tuple: a claim builds thousands of these, at a third of the cost."""

    id: int
    kind: str
    payload: Any
    status: Status
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int | None
    idempotency_key: str | None
    created_at: datetime
    errors: Sequence[Mapping[str, Any]] = ()
    last_error: str | None = None
    lease_until: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    trace_parent: str | None = None
    """The ``traceparent`` of the span that enqueued the job (``consumer.observe.spans``)."""
    lock_key: str | None = None
    group_key: str | None = None
    """The job's group: groups take turns in the claim (docs/flow-control.md)."""
    fair_at: datetime | None = None
    """A grouped job's turn (``None``: ungrouped, its turn is its ``run_at``)."""
    debounce_key: str | None = None
    debounce_until: datetime | None = None
    """A debounced job's key and latest run (``NewJob.debounce``)."""
    cancel_requested_at: datetime | None = None
    """When an operator asked to cancel the job while it ran (``JobStore.request_cancel``)."""
    result: Any = None
    """The result object an HTTP target reported with ``POST /jobs/{id}/complete``."""

    @classmethod
    def from_row(cls, row: Any) -> Job:
        values = dict(row._mapping)
        values.pop("claimed_by", None)
        values["status"] = Status(values["status"])
        values["errors"] = tuple(values.get("errors") or ())
        return cls(**values)


_new_job = tuple.__new__
"""Builds a ``Job`` from its values in field order without the generated ``__new__``'s call and
keyword handling (``tests/jobs/test_claimed_jobs.py`` checks the order against ``Job(...)``)."""


def claimed_jobs(rows: Sequence[Any], payloads_as_text: bool) -> list[Job]:
    """The jobs of a claim's rows (the columns ``queries.claimed`` returns, positionally), in
    the rows' order. ``payloads_as_text``: the rows carry each payload as JSON text (PostgreSQL's
    claim), decoded here for the whole claim in one call, not once per row. Aware datetimes in
    another zone than UTC (a session not in UTC) are converted; UTC ones are taken as they are."""
    if not rows:
        return []
    payloads = _decoded(rows) if payloads_as_text else [row[2] for row in rows]
    if rows[0][4].tzinfo is not UTC:
        rows = [_in_utc(row) for row in rows]
    running = Status.RUNNING
    return [
        _new_job(Job, (job_id, kind, payload, running, priority, run_at, attempts, limit, key,
                       created, errors or (), None, None, None, None, parent, None, group, turn,
                       None, None, None, None))
        for (job_id, kind, _, priority, run_at, attempts, limit, key, created, errors, parent,
             group, turn), payload in zip(rows, payloads, strict=True)
    ]  # fmt: skip


def _decoded(rows: Sequence[Any]) -> list[Any]:
    """The rows' JSON texts (valid JSON each: the column's type says so) as one array."""
    payloads: list[Any] = json.loads(f"[{','.join([row[2] for row in rows])}]")
    return payloads


def _in_utc(row: Any) -> tuple[Any, ...]:
    """A claim row with its ``run_at``, ``created_at`` and ``fair_at`` in UTC."""
    values = list(row)
    for at in (4, 8, 12):
        if values[at] is not None:
            values[at] = values[at].astimezone(UTC)
    return tuple(values)


def claim_order(job: Job) -> tuple[int, datetime, int]:
    """The order a sweeper runs a claim's jobs in: the claim's own (``queries.claim``): higher
    priority first, then the earlier turn (a grouped job's ``fair_at``, else its ``run_at``),
    then the older."""
    return (-job.priority, job.fair_at or job.run_at, job.id)


@dataclass(frozen=True)
class Failure:
    """A failed run to record: back to ``pending`` at ``run_at``, or ``dead``."""

    job_id: int
    dead: bool
    run_at: datetime
    error: str
    errors: list[dict[str, Any]]


@dataclass(frozen=True)
class Written:
    """What the guarded writes changed; a job missing from them had lost its lease."""

    done: int
    retried: int
    dead: int
    released: int
    held: int = 0
    """Left running under their claim: their target answered 202 (docs/long-running-jobs.md)."""

    @property
    def total(self) -> int:
        return self.done + self.retried + self.dead + self.released + self.held


class CancelOutcome(StrEnum):
    """What ``JobStore.request_cancel`` did (the CLI's, the dashboard's, the HTTP API's answer)."""

    CANCELLED = "cancelled"
    """The job was pending (or its holder's lease had lapsed): it is ``cancelled`` now."""
    REQUESTED = "cancel-requested"
    """The job is running: its next heartbeat sees the request, and it ends ``cancelled``."""
    FINISHED = "already-finished"
    UNKNOWN = "unknown"


class JobCancelled(ConsumerError):
    """A running job's cancel was requested: raised by ``JobContext.heartbeat`` (and by a target
    call the heartbeat abandoned). Whatever a handler does after, the job ends ``cancelled``."""


class JobHeld(ConsumerError):
    """An HTTP target answered 202 Accepted: the job stays ``running`` under its claim until the
    target reports (docs/long-running-jobs.md); the sweep records neither a result nor a retry."""


@dataclass(frozen=True)
class Renewed:
    """A lease renewal: how many jobs the claim still holds, and which of them an operator asked
    to cancel."""

    count: int
    cancelled: frozenset[int] = frozenset()
