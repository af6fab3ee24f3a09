"""An exactly-once event consumer behind Pub/Sub push.

Scheduler ticks, storage notifications and deploy hooks arrive at ``POST /push``; each event takes
effect once however often it is delivered. Extend it with a plugin whose ``register(registry)``
adds to the ``Registry``; build it from the environment with ``compose`` (or ``create_app``).

The names below are the public API, and this module is the one place that re-exports: plugins
import from ``consumer``, never from the layers underneath.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from consumer import errors
from consumer.config.fields import Section, setting
from consumer.config.parse import boolean, names, whole
from consumer.config.settings import Settings
from consumer.deploy.report import TargetResult, WarmReport
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
from consumer.jobs.model import EnqueueResult, InvalidJob, Job, NewJob, UnknownKind
from consumer.jobs.store import enqueue, enqueue_many
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import Service, compose
from consumer.storage.model import FileResult, FileStatus, Progress, StoredObject
from consumer.storage.processors import FileInput
from consumer.wire import events
from consumer.wire.events import DeployEvent, Event, OtherEvent, StorageEvent, TickEvent

__all__ = [
    "ConsumerError", "DeployEvent", "EnqueueResult", "Event", "FileInput", "FileResult",
    "FileStatus", "HandlerContext", "Incomplete", "InvalidJob", "Job", "LeaseLost",
    "NewJob", "NotReplayable", "OtherEvent", "Permanent", "Progress",
    "Registry", "Retryable", "Section", "Service", "Settings", "SettingsError", "Skip",
    "StorageEvent", "StoredObject", "TargetResult", "TickEvent", "UnknownKind", "WarmReport",
    "__version__", "boolean", "build_registry", "compose", "create_app", "enqueue",
    "enqueue_many", "errors", "events", "names", "setting", "whole",
]  # fmt: skip


def _version() -> str:
    try:
        return version("consumer")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__version__ = _version()
