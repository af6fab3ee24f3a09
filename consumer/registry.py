"""The handler registry: users add tick tasks, a storage handler and a deploy handler here,
without editing the package (see ``consumer.plugins``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from consumer.context import HandlerContext
from consumer.events import DeployEvent, Event, StorageEvent, TickEvent
from consumer.jobs.kinds import JobKinds

DEFAULT_TICK_PERIOD_SECONDS = 60

HandlerResult = Mapping[str, Any] | None
TickHandler = Callable[[HandlerContext, TickEvent], HandlerResult]
StorageHandler = Callable[[HandlerContext, StorageEvent], HandlerResult]
DeployHandler = Callable[[HandlerContext, DeployEvent], HandlerResult]
H = TypeVar("H", bound=Callable[..., HandlerResult])


@dataclass(frozen=True)
class TickTask:
    name: str
    period_seconds: int
    handler: TickHandler


class Registry:
    """Routes: tick tasks by name, one storage handler, one deploy handler."""

    def __init__(self) -> None:
        self.tasks: dict[str, TickTask] = {}
        self.storage_handler: StorageHandler | None = None
        self.deploy_handler: DeployHandler | None = None
        self.period_overrides: Mapping[str, int] = {}
        self.job_kinds = JobKinds()
        """Job kinds the sweep runs: ``@registry.job_kinds.kind("name")``."""

    def tick(self, name: str, period_seconds: int) -> Callable[[H], H]:
        """Register a tick task; the period defines its schedule slots (and so its duplicates)."""
        if period_seconds <= 0:
            raise ValueError("period_seconds must be positive")

        def register(handler: H) -> H:
            self.tasks[name] = TickTask(name, period_seconds, handler)
            return handler

        return register

    def storage(self, handler: H) -> H:
        self.storage_handler = handler
        return handler

    def deploy(self, handler: H) -> H:
        self.deploy_handler = handler
        return handler

    def period_of(self, task: str) -> int:
        """Configured override, else the registered period, else a minute."""
        if task in self.period_overrides:
            return self.period_overrides[task]
        registered = self.tasks.get(task)
        return registered.period_seconds if registered else DEFAULT_TICK_PERIOD_SECONDS

    def resolve(self, event: Event) -> Callable[[HandlerContext, Any], HandlerResult] | None:
        """The handler for ``event``, or ``None`` when it is unroutable."""
        if isinstance(event, TickEvent):
            task = self.tasks.get(event.task)
            return task.handler if task else None
        if isinstance(event, StorageEvent):
            return self.storage_handler
        if isinstance(event, DeployEvent):
            return self.deploy_handler
        return None
