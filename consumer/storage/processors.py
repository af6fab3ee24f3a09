"""File processors: a registry users extend, and what a processor is given.

A processor is ``fn(file: FileInput) -> FileResult``. Built-in: ``import-jobs``. A plugin adds
its own in its ``register(registry)``::

    def register(registry):
        @registry.processor("thumbnails")
        def thumbnails(file): ...

A processor must be idempotent per generation (a retry runs it again from its last committed
``Progress``): derive every effect's key from ``file.object.key``, and commit work together with
progress through ``file.commit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

from sqlalchemy import Connection

from consumer.db.engine import unavailable_on_db_fault
from consumer.errors import SettingsError
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.extensions import Processors
from consumer.pipeline.registry import Registry
from consumer.storage.budget import Pacer
from consumer.storage.durable import durably
from consumer.storage.model import FileResult, Progress, StoredObject
from consumer.storage.store import ProcessedFiles, ProgressLost
from consumer.wire.events import StorageEvent

Processor = Callable[["FileInput"], FileResult]


@dataclass
class FileInput:
    """One run of a processor over one object generation."""

    event: StorageEvent
    object: StoredObject
    options: Mapping[str, Any]
    """The matching rule's ``options``."""
    context: HandlerContext
    pacer: Pacer
    files: ProcessedFiles
    owner: str
    resumed: Progress = field(default_factory=Progress)
    """What earlier attempts committed: start after ``resumed.resume_offset``."""
    content: BinaryIO | None = None
    """The verified content at offset 0; ``None`` for events other than OBJECT_FINALIZE."""
    started: float = field(default_factory=time.monotonic)
    committed: Progress = field(init=False)
    """The latest progress committed, by an earlier attempt or by this one."""

    def __post_init__(self) -> None:
        self.committed = self.resumed

    def commit(self, work: Callable[[Connection], Progress]) -> Progress:
        """Run ``work`` and record the progress it returns in one transaction, so a retry resumes
        exactly after it; raise ``FileTakenOver`` (rolling ``work`` back) if a newer run owns
        the file. A database blip is retried while the budget lasts (``durably``)."""
        what = f"recording progress of {self.object.url}"
        return durably(self.context, lambda: self._commit(work), what, self._settled)

    def _commit(self, work: Callable[[Connection], Progress]) -> Progress:
        with unavailable_on_db_fault(), self.context.engine.begin() as connection:
            progress = self.timed(work(connection))
            now = self.context.clock()
            self.files.checkpoint(
                connection, self.object, self.owner, progress, now, after=self.committed
            )
        self.committed = progress
        return progress

    def _settled(self) -> Progress | None:
        """The progress an earlier try committed although its answer was lost, or ``None``:
        only this run writes the row's progress, so any move past ``committed`` is that try. A
        move back is a commit the database lost in a crash (``ProgressLost``)."""
        held = self.files.owned_progress(self.object, self.owner)
        if held is None or _position(held) == _position(self.committed):
            return None
        if _position(held) < _position(self.committed):
            raise ProgressLost(
                f"{self.object.url}: the database holds line {held.resume_line}, this run "
                f"committed up to line {self.committed.resume_line}: a commit was lost"
            )
        self.committed = held
        return held

    def timed(self, progress: Progress) -> Progress:
        """``progress`` with this attempt's processing time added to earlier attempts'."""
        elapsed_ms = int((time.monotonic() - self.started) * 1000)
        return progress.advanced(duration_ms=self.resumed.duration_ms + elapsed_ms)


def _position(progress: Progress) -> tuple[int, int, int, int]:
    return (
        progress.resume_line, progress.resume_offset, progress.rows_accepted,
        progress.rows_rejected,
    )  # fmt: skip


def processor_named(processors: Processors, name: str) -> Processor:
    """The processor a rule names; a rule naming an unregistered one is a configuration error."""
    processor = processors.get(name)
    if processor is None:
        known = ", ".join(processors.names()) or "none"
        raise SettingsError(
            f"a storage rule names processor {name!r}, which is not registered (known: {known})"
        )
    return cast(Processor, processor)


def processors_of(registry: Registry) -> Processors:
    """``registry.processors``, under the name plugins used before the registry held it."""
    return registry.processors
