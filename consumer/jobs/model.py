"""Job rows and requests: frozen values, a status enum, and the errors of the jobs API."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from consumer.errors import ConsumerError

MAX_KIND_LENGTH = 100
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
class NewJob:
    """A job to enqueue. ``key`` is its idempotency key; ``max_attempts=None`` takes the sweep's
    configured default when the job runs. Jobs sharing a ``lock_key`` run one at a time, in the
    order they were enqueued (docs/flow-control.md)."""

    kind: str
    payload: Any
    key: str | None = None
    run_at: datetime | None = None
    priority: int = 0
    max_attempts: int | None = None
    lock_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not 0 < len(self.kind) <= MAX_KIND_LENGTH:
            raise InvalidJob(f"kind must be a string of 1..{MAX_KIND_LENGTH} characters")
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise InvalidJob("key must be a non-empty string or None")
        if self.lock_key is not None and (not isinstance(self.lock_key, str) or not self.lock_key):
            raise InvalidJob("lock_key must be a non-empty string or None")
        if self.run_at is not None and self.run_at.tzinfo is None:
            raise InvalidJob("run_at must be an aware datetime")
        if self.max_attempts is not None and not 1 <= self.max_attempts <= INT32_MAX:
            raise InvalidJob(f"max_attempts must be 1..{INT32_MAX}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise InvalidJob("priority must be an integer")
        if not INT32_MIN <= self.priority <= INT32_MAX:
            raise InvalidJob(f"priority must be {INT32_MIN}..{INT32_MAX}")


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
    cancel_requested_at: datetime | None = None
    """When an operator asked to cancel the job while it ran (``JobStore.request_cancel``)."""
    result: Any = None
    """The result object an HTTP target reported with ``POST /jobs/{key}/complete``."""

    @classmethod
    def from_claim(cls, row: Any) -> Job:
        """From the columns ``store.CLAIMED`` returns, positionally: a claim returns many rows."""
        job_id, kind, payload, priority, run_at, attempts, limit, key, created, errors, parent = row
        return cls(
            job_id, kind, payload, Status.RUNNING, priority, run_at, attempts, limit, key,
            created, errors or (), trace_parent=parent,
        )  # fmt: skip

    @classmethod
    def from_driver_claim(cls, row: Any) -> Job:
        """``from_claim`` of a row as psycopg returns it: its aware datetimes, in the session's
        time zone, are converted to UTC here (as ``UTCDateTime`` does for the other queries)."""
        job_id, kind, payload, priority, run_at, attempts, limit, key, created, errors, parent = row
        return cls(
            job_id, kind, payload, Status.RUNNING, priority, run_at.astimezone(UTC), attempts,
            limit, key, created.astimezone(UTC), errors or (), trace_parent=parent,
        )  # fmt: skip

    @classmethod
    def from_row(cls, row: Any) -> Job:
        values = dict(row._mapping)
        values.pop("claimed_by", None)
        values["status"] = Status(values["status"])
        values["errors"] = tuple(values.get("errors") or ())
        return cls(**values)


def claim_order(job: Job) -> tuple[int, datetime, int]:
    """The order a sweeper runs a claim's jobs in: higher priority first, then the earlier due,
    then the older."""
    return (-job.priority, job.run_at, job.id)


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
