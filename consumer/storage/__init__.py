"""Storage uploads -> file processing (docs/storage.md).

A GCS notification for one object generation is matched against configured rules
(``consumer.config.storage_rules``); the chosen processor (``consumer.storage.processors``) reads
the
generation pinned and checksum-verified (``consumer.storage.reader``), and every run is recorded
in ``processed_files`` (``consumer.storage.store``). The built-in processor ``import-jobs`` turns
each row of a CSV or JSON Lines file into a job.

The public names are loaded on first use, so importing the package for one of them does not pull
the database and GCS code (nor import itself back through the registry).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer.storage.model import FileResult, FileStatus, Progress, StoredObject
    from consumer.storage.processors import FileInput, Processor, Processors, processors_of

_HOMES = {
    "FileResult": "model", "FileStatus": "model", "Progress": "model", "StoredObject": "model",
    "FileInput": "processors", "Processor": "processors", "Processors": "processors",
    "processors_of": "processors",
}  # fmt: skip

__all__ = [
    "FileInput", "FileResult", "FileStatus", "Processor", "Processors", "Progress",
    "StoredObject", "processors_of",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"consumer.storage.{home}"), name)
