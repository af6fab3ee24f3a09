"""A test plugin that counts the calls of its ``register``: each caller's PID goes into
``registered`` (this process) and, when ``COUNTED_PLUGIN_LOG`` names a file, one line of it (a
server's processes). A plugin whose ``register`` opens a client must not do so more than once per
process; this one shows whether it would."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from consumer.config.fields import setting
from consumer.config.settings import Section
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import TickEvent

LOG_ENV = "COUNTED_PLUGIN_LOG"
registered: list[int] = []


@dataclass(frozen=True, repr=False)
class CountedSettings(Section):
    prefix: ClassVar[str] = "COUNTED_"
    label: str = setting("counted")
    """Returned by the tick handler (shows the section reached the worker)."""


def register(registry: Registry) -> None:
    registered.append(os.getpid())
    log = os.environ.get(LOG_ENV)
    if log:
        with open(log, "a") as sink:
            sink.write(f"{os.getpid()}\n")
    registry.settings(CountedSettings)
    registry.tick("counted", period_seconds=3600)(count)


def count(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    return {"label": context.settings.section(CountedSettings).label, "pid": os.getpid()}


def registrations(log: str) -> dict[int, int]:
    """PID -> calls of ``register``, from the file ``COUNTED_PLUGIN_LOG`` named."""
    try:
        with open(log) as lines:
            pids = [int(line) for line in lines if line.strip()]
    except FileNotFoundError:
        return {}
    return {pid: pids.count(pid) for pid in set(pids)}
