"""The handler registry: the one place plugins extend the service (see ``consumer.plugins``).

A plugin's ``register(registry)`` may add tick tasks, job kinds, file processors, cache warmers,
and handlers for routes: the storage, deploy and jobs-topic (``job``) handlers, Pub/Sub
messages that are none of ours (``route("message", ...)``) and CloudEvents by type
(``cloudevent("com.example.x", ...)``).
The built-in handlers are given the tables they read when they are built, so a plugin that
replaces the storage or deploy handler does not cut the others off from their processors or
warmers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from consumer.config.fields import Section
from consumer.config.flow import JobLimit, declared
from consumer.config.settings import check_plugin_section
from consumer.config.targets import TargetSpec, target
from consumer.errors import AlreadyRegistered, SettingsError
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.extensions import JobKinds, Named, Processors, Warmers
from consumer.pipeline.policy import Factory
from consumer.wire.envelope import STORAGE_TYPE_PREFIX
from consumer.wire.events import DeployEvent, Event, OtherEvent, Route, StorageEvent
from consumer.wire.schedule import (
    Cron,
    Every,
    Schedule,
    ScheduleError,
    TickPolicy,
    as_schedule,
    check_jitter,
)

DEFAULT_TICK_PERIOD_SECONDS = 60
DEFAULT_SCHEDULE = Every(DEFAULT_TICK_PERIOD_SECONDS)

HandlerResult = Mapping[str, Any] | None
Handler = Callable[[HandlerContext, Any], HandlerResult]
StorageHandler = Callable[[HandlerContext, StorageEvent], HandlerResult]
DeployHandler = Callable[[HandlerContext, DeployEvent], HandlerResult]
MessageHandler = Callable[[HandlerContext, OtherEvent], HandlerResult]
H = TypeVar("H", bound=Callable[..., Any])
S = TypeVar("S", bound=type[Section])

ROUTES = ("storage", "deploy", "job", "message")
"""Routes a handler may be registered for; CloudEvent types have their own table."""


@dataclass(frozen=True)
class TickTask:
    name: str
    schedule: Schedule
    handler: Handler
    """Called with the tick event of each run."""
    policy: TickPolicy = field(default_factory=TickPolicy)
    """Its overlap and catch-up policies, as declared (``policy_of`` applies the settings')."""


class Registry:
    """Every extension point, each a table by name."""

    def __init__(self) -> None:
        self.tasks: dict[str, TickTask] = {}
        self.period_overrides: Mapping[str, Schedule | int] = {}
        """Schedules from the settings (``CONSUMER_TICK_PERIODS``); an int is seconds."""
        self.routes: Named[Handler] = Named("handler for route")
        self.cloudevents: Named[Handler] = Named("handler for CloudEvent type")
        self.one_commit_routes: set[str] = set()
        self.one_commit_types: set[str] = set()
        """Routes and CloudEvent types whose handler declared ``local_effects``."""
        self.route_policies: dict[str, Factory] = {}
        """What rules a route's deliveries around their claim (``consumer.pipeline.policy``)."""
        self.job_kinds = JobKinds()
        """Job kinds the sweep runs: ``@registry.job_kind("name")``."""
        self.job_limits: dict[str, JobLimit] = {}
        """Caps and rates job kinds declared (docs/flow-control.md)."""
        self.record_each_kinds: set[str] = set()
        """Job kinds whose every result the sweep records before the next job starts."""
        self.processors = Processors()
        """File processors a storage rule may name: ``@registry.processor("name")``."""
        self.warmers = Warmers()
        """Cache warmers run for each deploy: ``@registry.warmer("name", services=...)``."""
        self.setting_sections: dict[str, type[Section]] = {}
        """Plugins' settings sections by prefix: ``registry.settings(MySettings)``."""
        self.http_targets: Named[TargetSpec] = Named("HTTP target")
        """HTTP targets plugins declared (``registry.http_target``); the composition root
        installs them, with the settings' own, once the settings are read."""

    def settings(self, section: S) -> S:
        """Declare a plugin's settings section (also a class decorator): its
        ``CONSUMER_<prefix>*`` variables are then read and validated with the built-in ones,
        and handlers read it with ``context.settings.section(section)``."""
        check_plugin_section(section, self.setting_sections)
        self.setting_sections[section.prefix] = section
        return section

    def tick(
        self,
        name: str,
        period_seconds: int | None = None,
        *,
        cron: str | None = None,
        timezone: str = "UTC",
        replace: bool = False,
        **policy: str,
    ) -> Callable[[H], H]:
        """Register a tick task on a fixed period or a cron schedule (``cron="0 9 * * 1-5"``,
        ``timezone="Europe/Madrid"``): its slots key its ticks, and so decide its duplicates.
        ``overlap`` (``allow``, ``skip``, ``wait``), ``catch_up`` (``latest``, ``once``,
        ``all:N``) and ``jitter`` (a window: ``"30s"``): docs/flow-control.md."""
        schedule, chosen = _declared(name, period_seconds, cron, timezone, **policy)
        if name in self.tasks and not replace:
            raise AlreadyRegistered(
                f"tick task {name!r} is already registered (pass replace=True to replace it)"
            )

        def register(handler: H) -> H:
            self.tasks[name] = TickTask(name, schedule, handler, chosen)
            return handler

        return register

    def job_kind(
        self,
        name: str,
        *,
        replace: bool = False,
        record_each: bool = False,
        **limits: Any,
    ) -> Callable[[H], H]:
        """A job kind; ``limits``: ``cap`` (most of its jobs running at once across every pod),
        ``rate`` (most starts per interval: ``"50/1s"``), ``group_cap`` and ``group_rate`` (the
        same for each group of its jobs); ``record_each``: each result is recorded before
        the next job starts, however fast the job (a sweeper killed mid-batch then repeats at
        most the job it was running: for effects that cannot be taken back, like an email)."""
        if any(value is not None for value in limits.values()):
            self.job_limit(name, **limits)
        register = self.job_kinds.kind(name, replace=replace)

        def declare(handler: H) -> H:
            register(handler)  # raises if the name is taken: nothing else changes then
            if record_each:
                self.record_each_kinds.add(name)
            else:
                self.record_each_kinds.discard(name)  # a replaced kind declares its own
            return handler

        return declare

    def job_limit(self, name: str, **limits: Any) -> JobLimit:
        """Declare a job kind's caps and rates (for a kind added with ``job_kinds.add``)."""
        try:
            self.job_limits[name] = declared(**limits)
        except ValueError as exc:
            raise SettingsError(f"job kind {name!r}: {exc}") from None
        return self.job_limits[name]

    def processor(self, name: str, *, replace: bool = False) -> Callable[[H], H]:
        return self.processors.kind(name, replace=replace)

    def warmer(
        self, name: str, services: Collection[str] = (), *, replace: bool = False
    ) -> Callable[[H], H]:
        return self.warmers.warmer(name, services, replace=replace)

    def route(
        self, route: str, handler: H, *, replace: bool = False, local_effects: bool = False
    ) -> H:
        """The handler of ``route``: ``storage``, ``deploy``, ``job`` or ``message`` (anything
        else). ``local_effects``: every effect of the handler is a write to the service's own
        database through ``context.connection``, so claim, effects and outcome are one
        transaction (a one-commit handler, docs/plugins.md)."""
        if route not in ROUTES:
            raise ValueError(f"unknown route {route!r} (known: {', '.join(ROUTES)})")
        self.routes.add(route, handler, replace=replace)
        _mark(self.one_commit_routes, route, local_effects)
        return handler

    def storage(self, handler: H, *, replace: bool = False, local_effects: bool = False) -> H:
        return self.route("storage", handler, replace=replace, local_effects=local_effects)

    def deploy(self, handler: H, *, replace: bool = False, local_effects: bool = False) -> H:
        return self.route("deploy", handler, replace=replace, local_effects=local_effects)

    def cloudevent(
        self, event_type: str, handler: H, *, replace: bool = False, local_effects: bool = False
    ) -> H:
        """The handler of CloudEvents of ``event_type`` (a custom one, or any Eventarc type but
        a storage one); ``local_effects`` as for ``route``. A storage type is refused: storage
        CloudEvents are storage events, which the ``storage`` route (or a storage target) gets."""
        if event_type.startswith(STORAGE_TYPE_PREFIX):
            raise SettingsError(
                f"CloudEvent type {event_type!r} is a storage event, which never reaches a"
                " CloudEvent handler: register registry.storage(...) or serve {'storage': BUCKET}"
            )
        self.cloudevents.add(event_type, handler, replace=replace)
        _mark(self.one_commit_types, event_type, local_effects)
        return handler

    def route_policy(self, route: Route, factory: Factory) -> None:
        """``route``'s policy (``consumer.ticks``'s), built by ``factory`` per dispatcher."""
        if route.value in self.route_policies:
            raise AlreadyRegistered(f"route {route.value!r} has a policy already")
        self.route_policies[route.value] = factory

    def http_target(self, name: str, *, replace: bool = False, **declared: Any) -> TargetSpec:
        """Declare an HTTP target, as ``CONSUMER_HTTP_TARGETS`` does (same keys: ``url``,
        ``serves``, ``auth``, ``timeout_seconds``, ``concurrency``, and for a job kind ``cap`` and
        ``rate``); checked now."""
        try:
            spec = target(name, **declared)
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"HTTP target {name!r}: {exc}") from None
        self.http_targets.add(name, spec, replace=replace)
        return spec

    @property
    def storage_handler(self) -> Handler | None:
        return self.routes.get("storage")

    @property
    def deploy_handler(self) -> Handler | None:
        return self.routes.get("deploy")

    def schedule_of(self, task: str) -> Schedule:
        """Configured override, else the registered schedule, else every minute."""
        if task in self.period_overrides:
            return as_schedule(self.period_overrides[task])
        registered = self.tasks.get(task)
        return registered.schedule if registered else DEFAULT_SCHEDULE

    def policy_of(self, task: str, overrides: Mapping[str, Mapping[str, str]]) -> TickPolicy:
        """The registered policies, with those of ``overrides`` (``CONSUMER_TICK_POLICIES``,
        checked when read) on top."""
        registered = self.tasks.get(task)
        declared = registered.policy if registered else TickPolicy()
        return TickPolicy.of(**{**declared.named(), **overrides.get(task, {})})

    def resolve(self, event: Event) -> Handler | None:
        """The handler for ``event``, or ``None`` when it is unroutable."""
        return _RESOLVERS[event.route](self, event)

    def one_commit(self, event: Event) -> bool:
        """Whether the handler ``resolve`` gives ``event`` declared ``local_effects`` (a tick
        task never does: its policies write beside its run)."""
        if event.route is Route.OTHER:
            cloudevent = event.message.cloudevent
            if cloudevent is not None and cloudevent.type in self.cloudevents:
                return cloudevent.type in self.one_commit_types
            return "message" in self.one_commit_routes
        return event.route.value in self.one_commit_routes


def _tick(registry: Registry, event: Any) -> Handler | None:
    task = registry.tasks.get(event.task)
    return task.handler if task else None


def _other(registry: Registry, event: Any) -> Handler | None:
    """A CloudEvent's type picks its handler first; any other message goes to ``message``."""
    cloudevent = event.message.cloudevent
    by_type = registry.cloudevents.get(cloudevent.type) if cloudevent is not None else None
    return by_type or registry.routes.get("message")


_RESOLVERS: dict[Route, Callable[[Registry, Any], Handler | None]] = {
    Route.TICK: _tick,
    Route.STORAGE: lambda registry, _event: registry.routes.get("storage"),
    Route.DEPLOY: lambda registry, _event: registry.routes.get("deploy"),
    Route.JOB: lambda registry, _event: registry.routes.get("job"),
    Route.OTHER: _other,
}


def _mark(names: set[str], name: str, local_effects: bool) -> None:
    """A replaced handler keeps no flag of the one it replaced."""
    if local_effects:
        names.add(name)
    else:
        names.discard(name)


def _declared(
    name: str, period_seconds: int | None, cron: str | None, timezone: str, **policy: str
) -> tuple[Schedule, TickPolicy]:
    """The task's schedule and policies; a bad one is a start-up error naming the task."""
    if (period_seconds is None) == (cron is None):
        raise SettingsError(f"tick task {name!r}: give period_seconds or cron, not both or neither")
    try:
        every = Every(period_seconds) if period_seconds is not None else None
        schedule, chosen = every or Cron(str(cron), timezone), TickPolicy.of(**policy)
        check_jitter(schedule, chosen)
        return schedule, chosen
    except ScheduleError as exc:
        raise SettingsError(f"tick task {name!r}: {exc}") from None
