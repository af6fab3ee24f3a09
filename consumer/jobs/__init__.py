"""Durable jobs, run exactly once in effect by the ``sweep`` tick task.

Public API: ``enqueue`` / ``enqueue_many`` to add jobs, ``NewJob`` and ``EnqueueResult``.
The names are loaded on first use, so importing one module of the package (its settings
section, when a ``Settings`` is built) does not pull the database code.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer.jobs.model import EnqueueResult, InvalidJob, Job, NewJob, Status, UnknownKind
    from consumer.jobs.store import enqueue, enqueue_many

_HOMES = {
    **dict.fromkeys(("EnqueueResult", "InvalidJob", "Job", "NewJob", "Status", "UnknownKind"),
                    "model"),
    "enqueue": "store", "enqueue_many": "store",
}  # fmt: skip
__all__ = [
    "EnqueueResult", "InvalidJob", "Job", "NewJob", "Status", "UnknownKind", "enqueue",
    "enqueue_many",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"consumer.jobs.{home}"), name)
