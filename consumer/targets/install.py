"""The composition root's step for targets: each declared target (the plugins', then the
settings') becomes a handler in the registry table of what it serves.

A tick target is a tick task with its schedule; a CloudEvent-type, ``message`` or job-kind
target is that table's entry. A storage (bucket/prefix) or deploy (service) target goes in front
of the route's handler: its events go to the target, every other event to the handler that was
there (the built-in file processing or cache warming). With no target declared nothing is
registered, so the push path is exactly what it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from consumer.config.settings import Settings
from consumer.config.targets import TargetSpec
from consumer.errors import AlreadyRegistered, Permanent, SettingsError
from consumer.jobs.kinds import JobContext
from consumer.jobs.model import Job, JobHeld
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Handler, Registry, TickTask
from consumer.targets.auth import GoogleIdTokens, TokenSource
from consumer.targets.call import Caller
from consumer.targets.cloudevent import for_event, for_job


def install_targets(
    registry: Registry, settings: Settings, tokens: TokenSource | None = None
) -> None:
    """Register every declared target; ``tokens``: the ID-token source (google-auth's)."""
    specs = specs_of(registry, settings)
    names = [spec.name for spec in specs]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate:
        raise SettingsError(f"HTTP target {duplicate!r} is declared by a plugin and the settings")
    google = any(spec.auth.type == "google" for spec in specs)
    source = tokens or (GoogleIdTokens() if google else _no_tokens)
    for spec in specs:
        try:
            _INSTALL[spec.serves.what](registry, Caller(spec, source))
        except (AlreadyRegistered, SettingsError) as exc:
            raise SettingsError(f"HTTP target {spec.name!r}: {exc}") from None


class EventTarget:
    """The handler of an event a target serves: its delivery under the inbox key."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    def __call__(self, context: HandlerContext, event: Any) -> dict[str, object]:
        return self.caller.call(for_event(event, context.key), context.remaining)


class JobTarget(EventTarget):
    """A job kind: each job one call, its failures the job's retries (and ``dead``). A call is
    abandoned when the job is cancelled; a ``202 Accepted`` leaves the job running under its
    claim, for the target to report on (docs/long-running-jobs.md)."""

    def __call__(self, context: JobContext, job: Job) -> dict[str, object]:  # type: ignore[override]
        delivery = for_job(job, claim=context.token)
        result = self.caller.call(delivery, context.remaining, context.on_cancel)
        if result.get("status") == ACCEPTED:
            raise JobHeld(f"target {self.caller.spec.name!r} accepted job {job.id} (202)")
        return result


ACCEPTED = 202


class InFront:
    """A route's handler with a target in front for the events ``serves`` picks."""

    def __init__(
        self, serves: Callable[[Any], bool], target: EventTarget, behind: Handler | None
    ) -> None:
        self.serves, self.target, self.behind = serves, target, behind

    def __call__(self, context: HandlerContext, event: Any) -> Any:
        if self.serves(event):
            return self.target(context, event)
        if self.behind is None:
            raise Permanent(f"no handler for {event.route} events that no target serves")
        return self.behind(context, event)


def _tick(registry: Registry, caller: Caller) -> None:
    spec = caller.spec
    if spec.serves.name in registry.tasks:
        raise AlreadyRegistered(f"tick task {spec.serves.name!r} is already registered")
    schedule = spec.serves.schedule
    if schedule is None:  # a tick's is checked when it is declared: this is a code fault
        raise SettingsError(f"tick task {spec.serves.name!r} has no schedule")
    task = TickTask(spec.serves.name, schedule, EventTarget(caller))
    registry.tasks[spec.serves.name] = task


def _storage(registry: Registry, caller: Caller) -> None:
    serves = caller.spec.serves

    def picks(event: Any) -> bool:
        return bool(event.bucket == serves.name and event.name.startswith(serves.prefix))

    behind = registry.routes.get("storage")
    registry.route("storage", InFront(picks, EventTarget(caller), behind), replace=True)


def _deploy(registry: Registry, caller: Caller) -> None:
    service = caller.spec.serves.name
    behind = registry.routes.get("deploy")
    in_front = InFront(lambda event: event.service == service, EventTarget(caller), behind)
    registry.route("deploy", in_front, replace=True)


_INSTALL: dict[str, Callable[[Registry, Caller], object]] = {
    "tick": _tick,
    "storage": _storage,
    "deploy": _deploy,
    "cloudevent": lambda r, c: r.cloudevent(c.spec.serves.name, EventTarget(c)),
    "message": lambda r, c: r.route("message", EventTarget(c)),
    "job_kind": lambda r, c: r.job_kinds.add(c.spec.serves.name, JobTarget(c)),
}


def specs_of(registry: Registry, settings: Settings) -> list[TargetSpec]:
    """Every declared target: the plugins', then the settings'."""
    return [*registry.http_targets.values(), *settings.targets.targets]


def _no_tokens(audience: str, deadline: float) -> str:
    raise SettingsError(f"no ID-token source for audience {audience!r}")  # no google target
