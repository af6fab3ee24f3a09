"""Build the registry: the built-in handlers, then every plugin.

Plugins come from two places: modules named in ``CONSUMER_PLUGINS``, and the package entry point
group ``consumer.plugins`` (an installed package declares
``[project.entry-points."consumer.plugins"] name = "module"`` or ``"module:register"``).
Each plugin is a ``register(registry)`` function; a broken plugin is a ``SettingsError`` that
names it, raised before anything serves.

A process registers each plugin once, when it composes (``consumer.service.compose``); a
gunicorn worker composes its own after the fork, so nothing a ``register`` opens is shared
between processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from consumer.config.settings import Settings
from consumer.deploy import warming
from consumer.errors import ConsumerError, SettingsError
from consumer.jobs import cleanup
from consumer.jobs import tick as jobs_tick
from consumer.jobs import topic as jobs_topic
from consumer.pipeline.registry import Registry
from consumer.storage import handler as storage_handler
from consumer.ticks import policy as ticks

ENTRY_POINT_GROUP = "consumer.plugins"
"""Where installed packages declare plugins."""


def build_registry(settings: Settings) -> Registry:
    """The registry for settings built in code (tests, an app that embeds the service): the
    built-ins and the plugins of ``settings``, with its schedule overrides. A plugin section
    ``settings`` was built without must pass its rules with its defaults. Processes that start
    from the environment compose through ``consumer.service.compose`` instead."""
    registry = load_plugins(settings.plugins)
    registry.period_overrides = dict(settings.ticks.periods)
    missing = [kind for kind in registry.setting_sections.values() if kind not in settings.extra]
    problems = [problem for kind in missing for problem in kind().problems()]
    if problems:
        raise SettingsError("; ".join(problems))
    return registry


def load_plugins(module_names: Iterable[str]) -> Registry:
    """The built-in handlers, the entry points (by name), then ``module_names`` in order."""
    registry = Registry()
    register_builtins(registry)
    for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        load_entry_point(registry, entry_point)
    for module_name in module_names:
        load_plugin(registry, module_name)
    return registry


def register_builtins(registry: Registry) -> None:
    """The built-in tick tasks, routes and route policies: each feature registers its own."""
    ticks.register(registry)
    cleanup.register(registry)
    jobs_tick.register(registry)
    jobs_topic.register(registry)
    warming.register(registry)
    storage_handler.register(registry)


def load_plugin(registry: Registry, module_name: str) -> None:
    """Import ``module_name`` and call its ``register(registry)``."""
    where = f"CONSUMER_PLUGINS: {module_name!r}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plugin's own import error is the plugin's fault, not ours
        raise SettingsError(f"CONSUMER_PLUGINS: cannot import {module_name!r}: {exc}") from exc
    _register(registry, _register_function(module, where), where)


def load_entry_point(registry: Registry, entry_point: EntryPoint) -> None:
    """Load one ``consumer.plugins`` entry point: a module or a ``register`` function."""
    where = f"entry point {entry_point.name!r} ({entry_point.value})"
    try:
        target = entry_point.load()
    except Exception as exc:
        raise SettingsError(f"plugin {where}: cannot load: {exc}") from exc
    register = _register_function(target, where) if isinstance(target, ModuleType) else target
    if not callable(register):
        raise SettingsError(f"plugin {where} is not a register(registry) function")
    _register(registry, register, where)


def _register_function(module: ModuleType, where: str) -> Callable[[Registry], Any]:
    register = getattr(module, "register", None)
    if not callable(register):
        raise SettingsError(f"{where} has no register(registry)")
    return register


def _register(registry: Registry, register: Callable[[Registry], Any], where: str) -> None:
    """Run a plugin's ``register``; what it raises is reported with its name."""
    try:
        register(registry)
    except ConsumerError as exc:
        raise SettingsError(f"{where}: {exc}") from exc
    except Exception as exc:
        raise SettingsError(f"{where}: register() failed: {type(exc).__name__}: {exc}") from exc
