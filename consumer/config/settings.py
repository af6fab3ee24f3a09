"""Service settings: one frozen object composed of sections, built from ``CONSUMER_*`` variables
and validated at start as a whole (every problem of every section in one ``SettingsError``).

The built-in sections live beside this module (``consumer.config.jobs``, ``.storage``...); a
plugin declares its own (``registry.settings(MySettings)``) and the composition root
(``consumer.service``) hands the registry's sections to ``from_env``: settings never load plugins
or features to learn them. Nothing reads the environment at import time; tests build
``Settings.of(...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, TypeVar
from weakref import WeakValueDictionary

from sqlalchemy.engine import make_url

from consumer.config import env as env_vars
from consumer.config.admission import AdmissionSettings
from consumer.config.dashboard import DashboardSettings
from consumer.config.database import DatabaseSettings, DatabaseWaits
from consumer.config.deploy import DeployHookSettings, WarmingSettings
from consumer.config.fields import PREFIX, Rule, Section, named, setting
from consumer.config.flow import FlowSettings
from consumer.config.job_api import JobApiSettings
from consumer.config.jobs import JobSettings
from consumer.config.mail import NO_SMTP_HOST, SmtpSettings
from consumer.config.parse import boolean, names
from consumer.config.rules import database_url_problem
from consumer.config.sections import (
    DEFAULT_MAX_BODY_BYTES,
    AuthSettings,
    InboxSettings,
    LoggingSettings,
    ServerSettings,
    TickSettings,
)
from consumer.config.storage import StorageSettings
from consumer.config.targets import TargetSettings
from consumer.config.ticks import TickControlSettings, TickHookSettings
from consumer.config.tracing import TracingSettings
from consumer.errors import SettingsError

__all__ = ["DEFAULT_DATABASE_URL", "DEFAULT_MAX_BODY_BYTES", "PREFIX", "Section", "Settings"]
DEFAULT_DATABASE_URL = "sqlite:///consumer.db"
S = TypeVar("S", bound=Section)


_VALID: WeakValueDictionary[int, Settings] = WeakValueDictionary()
"""Settings objects that passed ``validate()`` as a server's, by ``id`` (held weakly)."""

SECTION = {"section": True}
"""Metadata of the fields of ``Settings`` that are sections."""


@dataclass(frozen=True, repr=False)
class Settings(Section):
    """Every knob of the service, section by section. Field docs are the configuration
    reference (docs/configuration.md)."""

    prefix: ClassVar[str] = ""
    database_url: str = setting(DEFAULT_DATABASE_URL)
    """SQLAlchemy URL: a SQLite file (embedded default) or ``postgresql+psycopg://...``."""
    local_mode: bool = setting(False, convert=boolean)
    """Insecure local mode: no push authentication. Must be asked for explicitly."""
    plugins: tuple[str, ...] = setting((), convert=names)
    """Modules with a ``register(registry)`` function that add user handlers."""
    server: ServerSettings = field(default_factory=ServerSettings, metadata=SECTION)
    auth: AuthSettings = field(default_factory=AuthSettings, metadata=SECTION)
    inbox: InboxSettings = field(default_factory=InboxSettings, metadata=SECTION)
    database: DatabaseSettings = field(default_factory=DatabaseSettings, metadata=SECTION)
    ticks: TickSettings = field(default_factory=TickSettings, metadata=SECTION)
    logging: LoggingSettings = field(default_factory=LoggingSettings, metadata=SECTION)
    jobs: JobSettings = field(default_factory=JobSettings, metadata=SECTION)
    flow: FlowSettings = field(default_factory=FlowSettings, metadata=SECTION)
    smtp: SmtpSettings = field(default_factory=SmtpSettings, metadata=SECTION)
    deploy_hook: DeployHookSettings = field(default_factory=DeployHookSettings, metadata=SECTION)
    warming: WarmingSettings = field(default_factory=WarmingSettings, metadata=SECTION)
    storage: StorageSettings = field(default_factory=StorageSettings, metadata=SECTION)
    dashboard: DashboardSettings = field(default_factory=DashboardSettings, metadata=SECTION)
    targets: TargetSettings = field(default_factory=TargetSettings, metadata=SECTION)
    tick_hook: TickHookSettings = field(default_factory=TickHookSettings, metadata=SECTION)
    job_api: JobApiSettings = field(default_factory=JobApiSettings, metadata=SECTION)
    tracing: TracingSettings = field(default_factory=TracingSettings, metadata=SECTION)
    tick_control: TickControlSettings = field(default_factory=TickControlSettings, metadata=SECTION)
    admission: AdmissionSettings = field(default_factory=AdmissionSettings, metadata=SECTION)
    extra: Mapping[type[Section], Section] = field(default_factory=dict)
    """The sections plugins declared, by class (read them with ``section``)."""

    @property
    def handler_budget_seconds(self) -> float:
        """How long a handler may run: the ack deadline less the safety margin."""
        return float(self.inbox.ack_deadline_seconds - self.inbox.safety_margin_seconds)

    @property
    def lease_seconds(self) -> int:
        """Inbox lease: short, renewed every second while a handler runs (a live worker keeps
        its claim; a killed one's is taken over within seconds)."""
        return self.inbox.lease_seconds

    @property
    def gunicorn_timeout_seconds(self) -> int:
        return self.inbox.ack_deadline_seconds

    @property
    def database_waits(self) -> DatabaseWaits:
        """The bounds on every database wait, below the ack deadline (``DatabaseSettings``)."""
        inbox = self.inbox
        return self.database.waits(inbox.ack_deadline_seconds, inbox.safety_margin_seconds)

    def section(self, kind: type[S]) -> S:
        """The section of class ``kind`` (a plugin's, or a built-in one); a plugin section that
        was never configured has its defaults."""
        for value in self.sections():
            if type(value) is kind:
                return value
        return kind()

    def sections(self) -> list[Section]:
        """The built-in sections, then the plugins'."""
        return [getattr(self, name) for name in part_classes()] + list(self.extra.values())

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        serves_push: bool = True,
        sections: Iterable[type[Section]] = (),
    ) -> Settings:
        """Build from ``CONSUMER_*`` variables; every problem is reported at once.
        ``serves_push=False`` (pull mode, CLI tools) has no endpoint to authenticate.
        ``sections``: the plugins' sections (``registry.setting_sections``): their variables are
        unknown settings without them."""
        plugins = tuple(sections)
        for kind in plugins:
            check_plugin_section(kind)
        known = {**builtin_catalog(), **env_vars.catalog({}, plugins)}
        values = env_vars.convert(env, known)
        parts: dict[str, Any] = {n: kind(**values.get(n, {})) for n, kind in part_classes().items()}
        extra = {kind: kind(**values.get(kind, {})) for kind in plugins}
        settings = cls(**values.get("", {}), **parts, extra=extra)
        settings.validate(serves_push=serves_push)
        if serves_push:
            settings.require_mail_transport()
            settings.require_admission()
        return settings

    @classmethod
    def of(cls, *sections: Section, **values: Any) -> Settings:
        """Defaults changed by ``with_values`` (the way tests and tools build settings)."""
        return cls().with_values(*sections, **values)

    def with_values(self, *sections: Section, **values: Any) -> Settings:
        """A copy with whole ``sections`` replaced and ``values`` changed, each named like its
        variable without ``CONSUMER_`` (``smtp_host=``, ``job_lease_seconds=``) or like a field
        of ``Settings`` (``database_url=``, ``jobs=JobSettings(...)``). Not validated."""
        top: dict[str, Any] = {"extra": dict(self.extra)}
        by_class = {kind: name for name, kind in part_classes().items()}
        for value in sections:
            if type(value) in by_class:
                top[by_class[type(value)]] = value
            else:
                top["extra"][type(value)] = value
        per_part: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name in _OWN_FIELDS:
                top[name] = value
            elif name in flat_index():
                owner, attribute = flat_index()[name]
                per_part.setdefault(owner, {})[attribute] = value
            else:
                raise TypeError(f"no setting named {name!r}")
        for owner, changes in per_part.items():
            top[owner] = dataclasses.replace(top.get(owner, getattr(self, owner)), **changes)
        return dataclasses.replace(self, **top)

    def value(self, name: str) -> Any:
        """A setting by its variable's name without ``CONSUMER_`` (``"send_to"``)."""
        owner, attribute = flat_index()[name]
        return getattr(getattr(self, owner) if owner else self, attribute)

    def require_mail_transport(self) -> None:
        """A process that runs handlers (and so the ``email`` job kind) outside local mode needs
        an SMTP host; the CLI's tools, which send no mail, do not."""
        if not (self.local_mode or self.smtp.host):
            raise SettingsError(NO_SMTP_HOST)

    def require_admission(self) -> None:
        """A server or a pull outside local mode declares what each subscription may start, and
        signs what it publishes (docs/sources.md); settings built in code are not held to it."""
        jobs = self.jobs
        publishes = bool(jobs.continuation_topic or jobs.wake_topic)
        if problems := self.admission.deployment_problems(self.local_mode, publishes):
            raise SettingsError("; ".join(problems))

    def validate(self, *, serves_push: bool = True) -> None:
        """Refuse settings that would break the delivery promise or leave the endpoint open:
        this object's rules, then every section's. Settings are frozen: once they pass as a
        server's they are not checked again (``create_app`` checks what ``from_env`` just did)."""
        if _VALID.get(id(self)) is self:
            return
        problems = [message for ok, message in self._rules(serves_push) if not ok]
        for value in self.sections():
            problems += value.problems()
        if problems:
            raise SettingsError("; ".join(problems))
        if serves_push:  # the strictest rules: they cover serves_push=False too
            _VALID[id(self)] = self

    def _rules(self, serves_push: bool) -> list[Rule]:
        return [
            (
                self.local_mode or self.auth.configured or not serves_push,
                "push authentication is not configured: set CONSUMER_PUSH_AUDIENCE and "
                "CONSUMER_PUSH_SERVICE_ACCOUNTS (OIDC) or CONSUMER_PUSH_TOKEN, "
                "or CONSUMER_LOCAL_MODE=true for an insecure local run",
            ),
            named("CONSUMER_DATABASE_URL", database_url_problem(self.database_url)),
            *self.database.below(self.inbox.ack_deadline_seconds),
        ]

    def __repr__(self) -> str:
        """Every field but the secrets (each section hides its own); the database URL without
        its password."""
        own = f"database_url={redacted_url(self.database_url)!r}, local_mode={self.local_mode!r}"
        shown = [own, f"plugins={self.plugins!r}"]
        shown += [f"{name}={getattr(self, name)!r}" for name in part_classes()]
        shown += [f"extra={list(self.extra.values())!r}"] if self.extra else []
        return f"Settings({', '.join(shown)})"


def part_classes() -> dict[str, type[Section]]:
    """Attribute -> class of every built-in section, in the order of the reference."""
    return {
        spec.name: spec.default_factory  # type: ignore[misc]
        for spec in dataclasses.fields(Settings)
        if "section" in spec.metadata
    }


_OWN_FIELDS = frozenset(spec.name for spec in dataclasses.fields(Settings))


@cache
def builtin_catalog() -> env_vars.Catalog:
    """``CONSUMER_*`` variable -> (owner, field) of ``Settings`` and every built-in section."""
    owners: dict[env_vars.Owner, type[Section]] = {"": Settings}
    owners.update(part_classes())
    return env_vars.catalog(owners)


@cache
def flat_index() -> dict[str, tuple[str, str]]:
    """A built-in setting's variable without ``CONSUMER_``, lowercased -> (owner, field)."""
    return {
        variable[len(PREFIX) :].lower(): (str(owner), spec.name)
        for variable, (owner, spec) in builtin_catalog().items()
    }


def check_plugin_section(kind: Any, taken: Mapping[str, type[Section]] | None = None) -> None:
    """Refuse a plugin section that is malformed, uses a built-in prefix, or overlaps one of
    ``taken`` (the other plugin sections, by prefix)."""
    problem = env_vars.plugin_section_problem(kind, builtin_catalog())
    if problem:
        raise SettingsError(problem)
    env_vars.check_prefix_free(kind, taken or {})


def redacted_url(url: str) -> str:
    """A database URL with its password masked (unparseable: nothing of it is shown)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # any parse failure: show nothing that might be a secret
        return "[unparseable]"
