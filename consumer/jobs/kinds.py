"""What a job handler is given. Kinds live in the registry: ``@registry.job_kind("email")``
registers a function that performs one job, from a plugin, without editing the package."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.model import Job
from consumer.pipeline.extensions import Functions

JobHandler = Callable[["JobContext", Job], Any]


@dataclass
class JobContext:
    """What a job handler is given, one per batch (a context manager). ``resource`` shares one
    connection (an SMTP session, say) across the jobs of the batch; it is closed at the end."""

    settings: Settings
    engine: Engine
    deadline: float
    """``time.monotonic()`` value by which the sweep must have returned."""
    _stack: ExitStack = field(default_factory=ExitStack)
    _resources: dict[str, Any] = field(default_factory=dict)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

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


JobKinds = Functions
"""The registry's job-kind table (``registry.job_kinds``), by name."""

BUILT_IN = frozenset({"email"})
"""Kinds the package itself provides (``consumer.jobs.tick`` registers them)."""
