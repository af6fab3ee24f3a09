"""The job-kind registry: ``registry.job_kinds.kind("email")`` registers a function that performs
one job. Users add kinds from a plugin, without editing the package."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Engine

from consumer.jobs.model import Job
from consumer.settings import Settings

JobHandler = Callable[["JobContext", Job], Any]
F = TypeVar("F", bound=JobHandler)


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


BUILT_IN = frozenset({"email"})
"""Kinds the package itself provides (``consumer.jobs.tick`` registers them)."""
_registered: set[str] = set()


def known_kinds() -> frozenset[str]:
    """Every kind that a registry in this process has registered, and the built-in ones.

    ``enqueue`` is called by code that holds an engine but not the registry (a plugin's
    handler, a script), so the kinds registered in this process are remembered here; what a
    registry *runs* is still only its own ``JobKinds``."""
    return BUILT_IN | _registered


class JobKinds:
    """Job kinds by name; a later registration of a name replaces the earlier one."""

    def __init__(self) -> None:
        self._handlers: dict[str, JobHandler] = {}

    def kind(self, name: str) -> Callable[[F], F]:
        """Decorator: ``@registry.job_kinds.kind("email")``."""

        def register(handler: F) -> F:
            self.add(name, handler)
            return handler

        return register

    def add(self, name: str, handler: JobHandler) -> None:
        if not name:
            raise ValueError("a job kind needs a name")
        self._handlers[name] = handler
        _registered.add(name)

    def get(self, name: str) -> JobHandler | None:
        return self._handlers.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._handlers))

    def __contains__(self, name: object) -> bool:
        return name in self._handlers
