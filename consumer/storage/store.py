"""``ProcessedFiles``: the ``processed_files`` table's queries (``consumer.storage.queries``), run
in the caller's transaction when given its ``connection``, else in one of their own.

A run owns its row through an ``owner`` token: ``begin`` hands the row to the newest run (the
inbox only lets one start once the previous lease expired), and every later write says
``WHERE ... AND owner = ? AND status = 'running'``. Zero rows means a newer run took the file
over; the writer stops, and its transaction (with the jobs it was adding) rolls back. A run's
progress and final status are also written only on top of the resume point it last committed:
a batch commits without waiting for the disk, and a crash can lose it (``ProgressLost``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.errors import Retryable
from consumer.pipeline.context import LeaseLost
from consumer.storage import queries
from consumer.storage.model import FileRow, FileStatus, Progress, StoredObject

MAX_ERROR_CHARS = 2000


class FileTakenOver(LeaseLost):
    """A newer run of the same file owns its ``processed_files`` row now."""


class ProgressLost(Retryable):
    """The row holds an earlier resume point than this run committed: a commit that did not wait
    for the disk (a batch's, ``RELAX_COMMIT``) was lost with its jobs when PostgreSQL crashed.
    Going on from memory would skip those rows, so the attempt ends and the redelivery resumes
    from what is durable (the jobs' keys make the rows that did survive a no-op)."""


def _position(progress: Progress | None) -> tuple[int, int] | None:
    return None if progress is None else (progress.resume_line, progress.resume_offset)


def _progress_values(progress: Progress) -> dict[str, Any]:
    return {
        "rows_accepted": progress.rows_accepted, "rows_rejected": progress.rows_rejected,
        "jobs_created": progress.jobs_created, "resume_line": progress.resume_line,
        "resume_offset": progress.resume_offset, "errors": list(progress.errors) or None,
        "duration_ms": progress.duration_ms,
    }  # fmt: skip


def _new_row(
    obj: StoredObject, processor: str, status: FileStatus, now: datetime
) -> dict[str, Any]:
    return {
        "bucket": obj.bucket, "name": obj.name, "generation": obj.generation,
        "processor": processor, "status": status, "size": obj.size,
        "content_type": obj.content_type or None, "attempts": 1, "started_at": now,
        "updated_at": now, **_progress_values(Progress()),
    }  # fmt: skip


class ProcessedFiles(Store):
    """Named queries over ``processed_files``."""

    def begin(
        self,
        obj: StoredObject,
        processor: str,
        owner: str,
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> FileRow:
        """Start (or take over) the run of ``obj``; a finished row is returned untouched."""
        row = {"owner": owner, **_new_row(obj, processor, FileStatus.RUNNING, now)}
        with self._write(connection) as conn:
            begun = conn.execute(queries.begin(self.dialect, row)).first()
            if begun is None:
                begun = conn.execute(queries.by_identity(obj)).first()
        return FileRow.from_row(begun)

    def checkpoint(
        self,
        connection: Connection,
        obj: StoredObject,
        owner: str,
        progress: Progress,
        now: datetime,
        *,
        after: Progress | None = None,
    ) -> None:
        """Record progress inside the caller's transaction (the one adding the work it covers):
        its ``connection`` is required, since progress without that work would skip it. Given
        ``after`` (this run's last committed progress), only on top of it (``ProgressLost``)."""
        values = {"updated_at": now, **_progress_values(progress)}
        statement = queries.owned_write(obj, owner, values, _position(after))
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise self._not_written(obj, owner, after, conn)

    def finish(
        self,
        obj: StoredObject,
        owner: str,
        status: FileStatus,
        progress: Progress,
        now: datetime,
        *,
        checksum: str | None = None,
        result: Any = None,
        error: str = "",
        after: Progress | None = None,
        connection: Connection | None = None,
    ) -> None:
        """Record the outcome; raise ``FileTakenOver`` if a newer run owns the row, and, given
        ``after`` (this run's last committed progress), ``ProgressLost`` if the row holds less."""
        statement = queries.owned_write(obj, owner, {
            "status": status, "checksum": checksum, "result": result, "updated_at": now,
            "finished_at": now, "last_error": error[:MAX_ERROR_CHARS] or None, "owner": None,
            **_progress_values(progress),
        }, _position(after))  # fmt: skip
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise self._not_written(obj, owner, after, conn)

    def _not_written(
        self, obj: StoredObject, owner: str, after: Progress | None, connection: Connection
    ) -> LeaseLost | ProgressLost:
        """Why an owned write changed no row: another run owns it, or it holds less than
        ``after``."""
        held = self.owned_progress(obj, owner, connection=connection)
        if held is None or after is None:
            return FileTakenOver(f"{obj.url} was taken over by a newer run")
        return ProgressLost(
            f"{obj.url}: the database holds line {held.resume_line}, this run committed up to "
            f"line {after.resume_line}: a commit was lost; resuming from what is durable"
        )

    def note_error(
        self,
        obj: StoredObject,
        owner: str,
        error: str,
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> None:
        """Keep why the last attempt failed; the row stays ``running`` for the retry."""
        values = {"last_error": error[:MAX_ERROR_CHARS], "updated_at": now}
        statement = queries.owned_write(obj, owner, values)
        with self._write(connection) as conn:
            conn.execute(statement)

    def record_skip(
        self,
        obj: StoredObject,
        owner: str,
        reason: str,
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> None:
        """The generation cannot be read (deleted, superseded): record why, finished. Guarded
        like every write: raise ``FileTakenOver`` if a newer run owns the row."""
        statement = queries.owned_write(obj, owner, {
            "status": FileStatus.SKIPPED, "last_error": reason[:MAX_ERROR_CHARS], "owner": None,
            "updated_at": now, "finished_at": now,
        })  # fmt: skip
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise FileTakenOver(f"{obj.url} was taken over by a newer run")

    def owned_progress(
        self, obj: StoredObject, owner: str, *, connection: Connection | None = None
    ) -> Progress | None:
        """The progress recorded by ``owner``'s run, while it still owns the row."""
        with self._read(connection) as conn:
            row = conn.execute(queries.owned_row(obj, owner)).first()
        return FileRow.from_row(row).progress if row else None

    def get(
        self, bucket: str, name: str, generation: int, *, connection: Connection | None = None
    ) -> FileRow | None:
        obj = StoredObject(bucket, name, generation)
        with self._read(connection) as conn:
            row = conn.execute(queries.by_identity(obj)).first()
        return FileRow.from_row(row) if row else None

    def list(
        self,
        status: FileStatus | None = None,
        limit: int = 50,
        *,
        connection: Connection | None = None,
    ) -> Sequence[FileRow]:
        """Most recently updated first."""
        with self._read(connection) as conn:
            return [FileRow.from_row(row) for row in conn.execute(queries.listed(status, limit))]
