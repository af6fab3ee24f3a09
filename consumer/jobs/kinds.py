"""What a job handler is given. Kinds live in the registry: ``@registry.job_kind("email")``
registers a function that performs one job, from a plugin, without editing the package."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.model import Job, JobCancelled, NewJob, UnknownKind

JobHandler = Callable[["JobContext", Job], Any]


class Heartbeat(Protocol):
    """What a job's context asks of the sweep's lease heartbeat (``consumer.jobs.lease``)."""

    cancelled: set[int]

    def ensure_fresh(self, now: float) -> bool: ...

    def watch(self, job_id: int, on_cancel: Callable[[], None]) -> AbstractContextManager[None]: ...


@dataclass
class JobContext:
    """What a job handler is given, one per batch (a context manager). ``resource`` shares one
    connection (an SMTP session, say) across the jobs of the batch; it is closed at the end."""

    settings: Settings
    engine: Engine
    deadline: float
    """``time.monotonic()`` value by which the sweep must have returned."""
    lease: Heartbeat | None = None
    """The sweep's lease heartbeat (None outside a sweep: nothing can cancel the job)."""
    token: str = ""
    """The claim the job runs under: a target's call carries it (``X-Consumer-Claim``)."""
    job: Job | None = None
    """The job running now (the sweep sets it before each)."""
    _stack: ExitStack = field(default_factory=ExitStack)
    _resources: dict[str, Any] = field(default_factory=dict)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def cancelled(self) -> bool:
        """Whether an operator asked to cancel the running job (as the last renewal read)."""
        return (
            self.lease is not None and self.job is not None and self.job.id in self.lease.cancelled
        )

    def heartbeat(self) -> None:
        """A long handler's check between steps: renews the lease now if the heartbeat fell
        behind, and raises ``JobCancelled`` once the job's cancel was requested (the job then
        ends ``cancelled``, whatever the handler does next)."""
        if self.lease is not None:
            self.lease.ensure_fresh(time.monotonic())
        if self.cancelled:
            raise JobCancelled(f"job {self.job.id if self.job else '?'} was cancelled")

    def on_cancel(self, callback: Callable[[], None]) -> AbstractContextManager[None]:
        """Call ``callback`` (from the heartbeat's thread) if the running job is cancelled while
        the block runs: a target call is abandoned so."""
        if self.lease is None or self.job is None:
            return nullcontext()
        return self.lease.watch(self.job.id, callback)

    def resource(self, name: str, factory: Callable[[], AbstractContextManager[Any]]) -> Any:
        """The batch's ``name`` resource, entered from ``factory()`` on first use."""
        if name not in self._resources:
            self._resources[name] = self._stack.enter_context(factory())
        return self._resources[name]

    def discard(self, name: str) -> None:
        """Forget a broken resource so the next job opens a fresh one (closed at batch end)."""
        self._resources.pop(name, None)

    def __enter__(self) -> JobContext:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the batch's resources."""
        self._stack.close()
        self._resources.clear()


BUILT_IN = frozenset({"email"})
"""Kinds the package itself provides (``consumer.jobs.tick`` registers them)."""


def check_kinds(
    new_jobs: Iterable[NewJob], kinds: Collection[str] | None, allow_unknown: bool
) -> None:
    """Refuse jobs that no sweeper would ever run: they would wait, due, forever. ``kinds``:
    the kinds the caller's registry provides (``registry.job_kinds.names()``), besides the
    built-in ones, which are all a caller that gives none is checked against."""
    if allow_unknown:
        return
    known = BUILT_IN.union(kinds or ())
    unknown = {job.kind for job in new_jobs} - known
    if unknown:
        raise UnknownKind(unknown, known)
