"""The operator's controls of tick tasks, shared by ``consumer tasks`` and the dashboard: pause,
resume and run now, each logged with who did it, and the list of tasks with their state.

A run now is a tick of its own (attribute ``run_now=<id>``, key ``tick:TASK:run-now:<id>``) run
in this process through the same pipeline as a push: it respects a pause and the task's overlap
policy, and a copy of one run-now (same id) runs once.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import ConsumerError
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.ticks.pauses import Pause, TickControl
from consumer.ticks.store import TickStore
from consumer.wire.events import TickEvent
from consumer.wire.message import Format, PushMessage
from consumer.wire.outcomes import Outcome
from consumer.wire.schedule import TickPolicy
from consumer.wire.timeutil import utcnow

log = logging.getLogger("consumer.tasks")
MAX_REASON = 500
"""A pause's reason is shown on every status page: a sentence, not a document."""


class Composed(Protocol):
    """What the controls use of a composed service (``consumer.service.Service``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def registry(self) -> Registry: ...


class UnknownTask(ConsumerError):
    """No tick task of that name is registered."""


@dataclass(frozen=True)
class TaskState:
    """A registered tick task as an operator sees it."""

    name: str
    schedule: str
    policy: TickPolicy
    last_slot: datetime | None
    pause: Pause | None


def task_states(service: Composed) -> list[TaskState]:
    """Every registered task, by name: its schedule, policies, last completed slot, pause."""
    progress = TickStore(service.engine)
    pauses = {pause.task: pause for pause in TickControl(service.engine).all_paused()}
    overrides = service.settings.tick_control.policies
    return [
        TaskState(
            name,
            str(service.registry.schedule_of(name)),
            service.registry.policy_of(name, overrides),
            progress.last_slot(name),
            pauses.get(name),
        )
        for name in sorted(service.registry.tasks)
    ]


def pause(service: Composed, task: str, by: str, reason: str = "") -> str:
    """Pause ``task`` on every pod; what was done, in words."""
    _require_task(service, task)
    if len(reason) > MAX_REASON:
        raise ConsumerError(f"the reason is longer than {MAX_REASON} characters")
    paused = TickControl(service.engine).pause(task, utcnow(), by, reason)
    result = f"{task} is paused" if paused else f"{task} was paused already"
    return _logged("pause", task, by, paused, result)


def resume(service: Composed, task: str, by: str) -> str:
    _require_task(service, task)
    resumed = TickControl(service.engine).resume(task)
    result = f"{task} is resumed" if resumed else f"{task} was not paused"
    return _logged("resume", task, by, resumed, result)


def run_now(service: Composed, task: str, by: str, run_id: str = "") -> Outcome:
    """Run ``task`` now, in this process, under a run-now key (``run_id``: a new one if empty;
    the same id again is a duplicate)."""
    _require_task(service, task)
    run_id = run_id or uuid.uuid4().hex
    dispatcher = Dispatcher(service.settings, service.engine, service.registry)
    attributes = {"task": task, "run_now": run_id, "run_by": by}
    message = PushMessage(f"run-now-{run_id}", utcnow(), attributes=attributes, format=Format.CLI)
    event = dispatcher.classify(message)
    assert isinstance(event, TickEvent) and event.run_now == run_id
    outcome = dispatcher.handle(event, Source.CLI)
    _logged("run-now", task, by, outcome.acked, f"{outcome.key}: {outcome.kind.value}")
    return outcome


def _require_task(service: Composed, task: str) -> None:
    if task not in service.registry.tasks:
        names = ", ".join(sorted(service.registry.tasks)) or "none"
        raise UnknownTask(f"no tick task {task!r} is registered (registered: {names})")


def _logged(action: str, task: str, by: str, ok: bool, result: str) -> str:
    """One line per action with its author, in the dashboard actions' shape."""
    extra = {"who": by, "action": action, "target": task, "ok": ok, "result": result}
    log.info("task action", extra=extra)
    return result
