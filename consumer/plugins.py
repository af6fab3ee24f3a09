"""Build the registry: the built-in handlers, then every plugin.

Plugins come from two places: modules named in ``CONSUMER_PLUGINS``, and the package entry point
group ``consumer.plugins`` (an installed package declares
``[project.entry-points."consumer.plugins"] name = "module"`` or ``"module:register"``).
Each plugin is a ``register(registry)`` function; a broken plugin is a ``SettingsError`` that
names it, raised before anything serves.

A process registers each plugin once: the registry ``Settings.loaded_from_env`` loads them into
(to learn their settings sections) is handed on to ``build_registry``. A gunicorn worker loads
its own after the fork, so nothing a ``register`` opens is shared between processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from consumer.config.env import ENTRY_POINT_GROUP
from consumer.config.parse import names
from consumer.config.settings import Settings
from consumer.deploy import warming
from consumer.errors import ConsumerError, SettingsError
from consumer.jobs import cleanup
from consumer.jobs import tick as jobs_tick
from consumer.pipeline.registry import Registry
from consumer.storage import handler as storage_handler


def build_registry(settings: Settings, *, loaded: Registry | None = None) -> Registry:
    """The registry a server runs with: built-ins first, so a plugin may replace one. A plugin
    section ``settings`` was built without (tests) must pass its rules with its defaults.
    ``loaded``: the registry ``Settings.loaded_from_env`` loaded the plugins of ``settings``
    into, finished here instead of registering them again."""
    if loaded is None:
        loaded = load_plugins(settings.plugins)
    loaded.period_overrides = dict(settings.ticks.periods)
    missing = [kind for kind in loaded.setting_sections.values() if kind not in settings.extra]
    problems = [problem for kind in missing for problem in kind().problems()]
    if problems:
        raise SettingsError("; ".join(problems))
    return loaded


def load_configured(env: Mapping[str, str]) -> tuple[Registry | None, str | None]:
    """The plugins of ``CONSUMER_PLUGINS`` in ``env`` and the entry points loaded into a
    registry, for ``Settings.loaded_from_env`` (the settings must be whole before anything is
    built from them), or why loading failed. A failure is not raised here: commands that never
    build the registry keep working, and the others report it when they build it."""
    module_names = names(env.get("CONSUMER_PLUGINS", ""))
    try:
        return load_plugins(module_names), None
    except SettingsError as exc:
        return None, str(exc)


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
    """The built-in tick tasks and routes: each feature registers its own."""
    cleanup.register(registry)
    jobs_tick.register(registry)
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
