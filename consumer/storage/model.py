"""Values of file processing: the object read, progress through it, and a processor's result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any


class FileStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    """Every row accepted (or, for other processors, the file handled)."""
    PARTIAL = "partial"
    """Some rows accepted, some rejected."""
    REJECTED = "rejected"
    """Nothing accepted: the file as a whole, or every row, is bad."""
    EMPTY = "empty"
    """No data rows at all (an empty file, or a header only)."""
    SKIPPED = "skipped"
    """The generation could not be read: deleted or superseded before processing."""
    FAILED = "failed"
    """A permanent failure of the processor."""


FINAL = frozenset(FileStatus) - {FileStatus.RUNNING}


@dataclass(frozen=True)
class StoredObject:
    """One generation of one object, as GCS describes it."""

    bucket: str
    name: str
    generation: int
    size: int | None = None
    content_type: str = ""
    content_encoding: str = ""
    crc32c: str = ""
    """Base64 of the big-endian CRC32C, as the JSON API gives it."""
    md5_hash: str = ""
    metageneration: int | None = None

    @property
    def url(self) -> str:
        return f"gs://{self.bucket}/{self.name}#{self.generation}"

    @property
    def key(self) -> str:
        """Prefix of the idempotency keys of what this generation produces."""
        return f"{self.bucket}/{self.name}#{self.generation}"


@dataclass(frozen=True)
class Progress:
    """How far a run got; committed with the work it describes, so a retry resumes exactly."""

    rows_accepted: int = 0
    rows_rejected: int = 0
    jobs_created: int = 0
    resume_line: int = 0
    """Last line whose rows are committed (0: nothing yet)."""
    resume_offset: int = 0
    """Byte offset just after ``resume_line``."""
    errors: tuple[Mapping[str, Any], ...] = ()
    """Rejected rows, ``{"line": n, "error": why}``, capped by the processor."""
    duration_ms: int = 0

    def advanced(self, **changes: Any) -> Progress:
        return replace(self, **changes)


@dataclass(frozen=True)
class FileResult:
    """What a processor returns: the final status, its progress and a JSON summary."""

    status: FileStatus
    progress: Progress = field(default_factory=Progress)
    details: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    """Why the file as a whole was rejected or failed."""


@dataclass(frozen=True)
class FileRow:
    """A ``processed_files`` row."""

    bucket: str
    name: str
    generation: int
    processor: str
    status: FileStatus
    progress: Progress
    attempts: int
    size: int | None
    content_type: str | None
    checksum: str | None
    last_error: str | None
    result: Any
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> FileRow:
        values = dict(row._mapping)
        progress = Progress(
            rows_accepted=values.pop("rows_accepted"),
            rows_rejected=values.pop("rows_rejected"),
            jobs_created=values.pop("jobs_created"),
            resume_line=values.pop("resume_line"),
            resume_offset=values.pop("resume_offset"),
            errors=tuple(values.pop("errors") or ()),
            duration_ms=values.pop("duration_ms"),
        )
        values.pop("owner", None)
        values["status"] = FileStatus(values["status"])
        return cls(progress=progress, **values)

    def summary(self) -> dict[str, Any]:
        """The JSON a handler returns for this file."""
        return {
            "file": f"gs://{self.bucket}/{self.name}#{self.generation}",
            "processor": self.processor,
            "status": self.status.value,
            "rows_accepted": self.progress.rows_accepted,
            "rows_rejected": self.progress.rows_rejected,
            "jobs_created": self.progress.jobs_created,
            "errors": list(self.progress.errors[:10]),
            **({"error": self.last_error} if self.last_error else {}),
            **(dict(self.result) if isinstance(self.result, Mapping) else {}),
        }
