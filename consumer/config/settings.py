"""Service settings: one frozen object composed of sections, built from ``CONSUMER_*`` variables
and validated at start as a whole (every problem of every section in one ``SettingsError``).

Each feature owns its section (``consumer.config.jobs``, ``consumer.config.storage``...) and
a plugin may declare its own (``registry.settings(MySettings)``). The feature sections are
imported when a ``Settings`` is first built, never when this module is: importing ``consumer``
stays cheap. Nothing reads the environment at import time; ``Settings.from_env`` is called by
the CLI and the WSGI entry points (as ``loaded_from_env``, which hands on the registry the
plugins were loaded into), and tests build ``Settings.of(...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from weakref import WeakValueDictionary

from consumer.config.fields import PREFIX, Rule, Section, named, setting
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
from consumer.errors import SettingsError

if TYPE_CHECKING:
    from consumer.config.dashboard import DashboardSettings
    from consumer.config.deploy import DeployHookSettings, WarmingSettings
    from consumer.config.jobs import JobSettings
    from consumer.config.mail import SmtpSettings
    from consumer.config.storage import StorageSettings
    from consumer.pipeline.registry import Registry

__all__ = ["DEFAULT_DATABASE_URL", "DEFAULT_MAX_BODY_BYTES", "PREFIX", "Section", "Settings"]
DEFAULT_DATABASE_URL = "sqlite:///consumer.db"
S = TypeVar("S", bound=Section)


_VALID: WeakValueDictionary[int, Settings] = WeakValueDictionary()
"""Settings objects that passed ``validate()`` as a server's, by ``id`` (held weakly)."""

SECTION = {"section": True}
"""Metadata of the fields of ``Settings`` that are sections."""


class Lazy:
    """The default of a feature's section: its class, named ``"module:Class"``, is imported when
    a ``Settings`` is built, so importing the core does not import the features."""

    def __init__(self, home: str) -> None:
        self.home = home

    def __call__(self) -> Any:  # the section, typed by the field it is the default of
        return self.section_class()()

    def section_class(self) -> type[Section]:
        module, _, name = self.home.partition(":")
        kind: type[Section] = getattr(import_module(module), name)
        return kind


@dataclass(frozen=True, repr=False)
class Settings(Section):
    """Every knob of the service, section by section. Field docs are the configuration
    reference (see README)."""

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
    ticks: TickSettings = field(default_factory=TickSettings, metadata=SECTION)
    logging: LoggingSettings = field(default_factory=LoggingSettings, metadata=SECTION)
    jobs: JobSettings = field(
        default_factory=Lazy("consumer.config.jobs:JobSettings"), metadata=SECTION
    )
    smtp: SmtpSettings = field(
        default_factory=Lazy("consumer.config.mail:SmtpSettings"), metadata=SECTION
    )
    deploy_hook: DeployHookSettings = field(
        default_factory=Lazy("consumer.config.deploy:DeployHookSettings"), metadata=SECTION
    )
    warming: WarmingSettings = field(
        default_factory=Lazy("consumer.config.deploy:WarmingSettings"), metadata=SECTION
    )
    storage: StorageSettings = field(
        default_factory=Lazy("consumer.config.storage:StorageSettings"), metadata=SECTION
    )
    dashboard: DashboardSettings = field(
        default_factory=Lazy("consumer.config.dashboard:DashboardSettings"), metadata=SECTION
    )
    extra: Mapping[type[Section], Section] = field(default_factory=dict)
    """The sections plugins declared, by class (read them with ``section``)."""

    @property
    def handler_budget_seconds(self) -> float:
        """How long a handler may run: the ack deadline less the safety margin."""
        return float(self.inbox.ack_deadline_seconds - self.inbox.safety_margin_seconds)

    @property
    def lease_seconds(self) -> int:
        """Inbox lease: outlives gunicorn's timeout (= ack deadline) so a live worker keeps it."""
        return self.inbox.ack_deadline_seconds + self.inbox.safety_margin_seconds

    @property
    def gunicorn_timeout_seconds(self) -> int:
        return self.inbox.ack_deadline_seconds

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
        sections: Iterable[type[Section]] | None = None,
    ) -> Settings:
        """Build from ``CONSUMER_*`` variables; every problem is reported at once.
        ``serves_push=False`` (pull mode, CLI tools) has no endpoint to authenticate.
        ``sections``: the plugins' sections; by default the configured plugins are loaded to
        learn them (``consumer.plugins.load_configured``); if one fails to load, its error is
        reported only with the problems it may explain (its variables are then unknown)."""
        return cls.loaded_from_env(env, serves_push=serves_push, sections=sections)[0]

    @classmethod
    def loaded_from_env(
        cls,
        env: Mapping[str, str],
        *,
        serves_push: bool = True,
        sections: Iterable[type[Section]] | None = None,
    ) -> tuple[Settings, Registry | None]:
        """``from_env``, and the registry the plugins were loaded into to learn their sections
        (None if nothing was loaded). A process that serves hands it to
        ``build_registry(settings, loaded=...)``, so each plugin's ``register`` runs once."""
        from consumer.config.env import read_env, wants_plugins

        loaded, failure = None, None
        if sections is None and wants_plugins(env):
            from consumer.plugins import load_configured

            loaded, failure = load_configured(env)
        if sections is None:
            sections = loaded.setting_sections.values() if loaded else ()
        settings = read_env(cls, env, tuple(sections), failure)
        settings.validate(serves_push=serves_push)
        if serves_push:
            settings.require_mail_transport()
        return settings, loaded

    @classmethod
    def of(cls, *sections: Section, **values: Any) -> Settings:
        """Defaults changed by ``with_values`` (the way tests and tools build settings)."""
        return cls().with_values(*sections, **values)

    def with_values(self, *sections: Section, **values: Any) -> Settings:
        """A copy with whole ``sections`` replaced and ``values`` changed, each named like its
        variable without ``CONSUMER_`` (``smtp_host=``, ``job_lease_seconds=``) or like a field
        of ``Settings`` (``database_url=``, ``jobs=JobSettings(...)``). Not validated."""
        from consumer.config.env import changed

        return changed(self, sections, values)

    def value(self, name: str) -> Any:
        """A setting by its variable's name without ``CONSUMER_`` (``"send_to"``)."""
        from consumer.config.env import flat_index

        owner, attribute = flat_index()[name]
        return getattr(getattr(self, owner) if owner else self, attribute)

    def require_mail_transport(self) -> None:
        """A process that runs handlers (and so the ``email`` job kind) outside local mode needs
        an SMTP host; the CLI's tools, which send no mail, do not."""
        from consumer.config.mail import NO_SMTP_HOST

        if not (self.local_mode or self.smtp.host):
            raise SettingsError(NO_SMTP_HOST)

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
    found: dict[str, type[Section]] = {}
    for spec in dataclasses.fields(Settings):
        if "section" in spec.metadata:
            default: Any = spec.default_factory
            found[spec.name] = default.section_class() if isinstance(default, Lazy) else default
    return found


def redacted_url(url: str) -> str:
    """A database URL with its password masked (unparseable: nothing of it is shown)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # any parse failure: show nothing that might be a secret
        return "[unparseable]"
