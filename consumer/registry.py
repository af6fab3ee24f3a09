"""The handler registry: users add tick tasks, a storage handler and a deploy handler here,
without editing the package (see ``consumer.plugins``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from consumer.context import HandlerContext
from consumer.errors import SettingsError
from consumer.events import DeployEvent, Event, StorageEvent, TickEvent
from consumer.jobs.kinds import JobKinds
from consumer.schedule import Cron, Every, Schedule, ScheduleError, as_schedule

DEFAULT_TICK_PERIOD_SECONDS = 60
DEFAULT_SCHEDULE = Every(DEFAULT_TICK_PERIOD_SECONDS)

HandlerResult = Mapping[str, Any] | None
TickHandler = Callable[[HandlerContext, TickEvent], HandlerResult]
StorageHandler = Callable[[HandlerContext, StorageEvent], HandlerResult]
DeployHandler = Callable[[HandlerContext, DeployEvent], HandlerResult]
H = TypeVar("H", bound=Callable[..., HandlerResult])


@dataclass(frozen=True)
class TickTask:
    name: str
    schedule: Schedule
    handler: TickHandler


class Registry:
    """Routes: tick tasks by name, one storage handler, one deploy handler."""

    def __init__(self) -> None:
        self.tasks: dict[str, TickTask] = {}
        self.storage_handler: StorageHandler | None = None
        self.deploy_handler: DeployHandler | None = None
        self.period_overrides: Mapping[str, Schedule | int] = {}
        """Schedules from the settings (``CONSUMER_TICK_PERIODS``); an int is seconds."""
        self.job_kinds = JobKinds()
        """Job kinds the sweep runs: ``@registry.job_kinds.kind("name")``."""

    def tick(
        self,
        name: str,
        period_seconds: int | None = None,
        *,
        cron: str | None = None,
        timezone: str = "UTC",
    ) -> Callable[[H], H]:
        """Register a tick task on a fixed period or a cron schedule (``cron="0 9 * * 1-5"``,
        ``timezone="Europe/Madrid"``): its slots key its ticks, and so decide its duplicates."""
        schedule = _schedule(name, period_seconds, cron, timezone)

        def register(handler: H) -> H:
            self.tasks[name] = TickTask(name, schedule, handler)
            return handler

        return register

    def storage(self, handler: H) -> H:
        self.storage_handler = handler
        return handler

    def deploy(self, handler: H) -> H:
        self.deploy_handler = handler
        return handler

    def schedule_of(self, task: str) -> Schedule:
        """Configured override, else the registered schedule, else every minute."""
        if task in self.period_overrides:
            return as_schedule(self.period_overrides[task])
        registered = self.tasks.get(task)
        return registered.schedule if registered else DEFAULT_SCHEDULE

    period_of = schedule_of  # the older name

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


def _schedule(name: str, period_seconds: int | None, cron: str | None, timezone: str) -> Schedule:
    """The task's schedule; a bad one is a start-up error naming the task."""
    if (period_seconds is None) == (cron is None):
        raise SettingsError(f"tick task {name!r}: give period_seconds or cron, not both or neither")
    try:
        return Every(period_seconds) if period_seconds is not None else Cron(str(cron), timezone)
    except ScheduleError as exc:
        raise SettingsError(f"tick task {name!r}: {exc}") from None
