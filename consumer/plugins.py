"""Build the registry: the built-in handlers, then each plugin module's ``register(registry)``."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from consumer.errors import SettingsError
from consumer.registry import Registry
from consumer.settings import Settings


def build_registry(settings: Settings, extra_plugins: Iterable[str] = ()) -> Registry:
    """The registry a server runs with: built-ins first, so a plugin may replace one."""
    from consumer.handlers import register_builtins

    registry = Registry()
    register_builtins(registry)
    for module_name in (*settings.plugins, *extra_plugins):
        load_plugin(registry, module_name)
    registry.period_overrides = dict(settings.tick_periods)
    return registry


def load_plugin(registry: Registry, module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"CONSUMER_PLUGINS: cannot import {module_name!r}: {exc}") from exc
    register = getattr(module, "register", None)
    if not callable(register):
        raise SettingsError(f"CONSUMER_PLUGINS: {module_name!r} has no register(registry)")
    register(registry)
