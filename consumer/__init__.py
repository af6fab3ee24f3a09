"""An exactly-once event consumer behind Pub/Sub push.

Scheduler ticks, storage notifications and deploy hooks arrive at ``POST /push``; each event takes
effect once however often it is delivered. Start with ``create_app``; extend it with a plugin
whose ``register(registry)`` adds to the ``Registry``.

The names below are the public API. They are imported on first use, so ``import consumer.x`` does
not load Flask, and the command line stays quick.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer import errors
    from consumer.config.settings import Settings
    from consumer.errors import (
        ConsumerError,
        Incomplete,
        LeaseLost,
        NotReplayable,
        Permanent,
        Retryable,
        SettingsError,
        Skip,
    )
    from consumer.http.app import create_app
    from consumer.pipeline.context import HandlerContext
    from consumer.pipeline.registry import MessageEvent, Registry
    from consumer.plugins import build_registry
    from consumer.wire import events
    from consumer.wire.events import DeployEvent, Event, OtherEvent, StorageEvent, TickEvent

__all__ = [
    "ConsumerError", "DeployEvent", "Event", "HandlerContext", "Incomplete", "LeaseLost",
    "MessageEvent", "NotReplayable", "OtherEvent", "Permanent", "Registry", "Retryable",
    "Settings", "SettingsError", "Skip", "StorageEvent", "TickEvent", "__version__",
    "build_registry", "create_app", "errors", "events",
]  # fmt: skip

_ERRORS = ("ConsumerError", "Incomplete", "LeaseLost", "NotReplayable", "Permanent", "Retryable")
_HOMES = {
    "create_app": "consumer.http.app",
    "HandlerContext": "consumer.pipeline.context",
    "Registry": "consumer.pipeline.registry",
    "MessageEvent": "consumer.pipeline.registry",
    "build_registry": "consumer.plugins",
    "Settings": "consumer.config.settings",
    **dict.fromkeys(("DeployEvent", "Event", "OtherEvent", "StorageEvent"), "consumer.wire.events"),
    **dict.fromkeys((*_ERRORS, "SettingsError", "Skip"), "consumer.errors"),
    "TickEvent": "consumer.wire.events",
}


def _version() -> str:
    try:
        return version("consumer")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__version__ = _version()


def __getattr__(name: str) -> Any:
    if name in ("errors", "events"):
        return importlib.import_module(
            {"errors": "consumer.errors", "events": "consumer.wire.events"}[name]
        )
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'consumer' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
