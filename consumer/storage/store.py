"""Every SQL statement on ``processed_files``, each named once.

A run owns its row through an ``owner`` token: ``begin`` hands the row to the newest run (the
inbox only lets one start once the previous lease expired), and every later write says
``WHERE ... AND owner = ? AND status = 'running'``. Zero rows means a newer run took the file
over; the writer stops, and its transaction (with the jobs it was adding) rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Update, and_, select, update

from consumer.db import dialect as sql
from consumer.db.store import Store
from consumer.pipeline.context import LeaseLost
from consumer.storage.model import FileRow, FileStatus, Progress, StoredObject
from consumer.storage.schema import processed_files as files

MAX_ERROR_CHARS = 2000


class FileTakenOver(LeaseLost):
    """A newer run of the same file owns its ``processed_files`` row now."""


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
        statement = sql.upsert(
            files,
            self.dialect,
            {"owner": owner, **_new_row(obj, processor, FileStatus.RUNNING, now)},
            conflict=[files.c.bucket, files.c.name, files.c.generation],
            set_=lambda excluded: {
                "owner": excluded.owner,
                "attempts": files.c.attempts + 1,
                "processor": excluded.processor,
                "updated_at": excluded.updated_at,
            },
            where=lambda excluded: files.c.status == FileStatus.RUNNING,
        ).returning(*files.c)
        with self._write(connection) as conn:
            row = conn.execute(statement).first()
            if row is None:
                row = conn.execute(self._select(obj)).first()
        return FileRow.from_row(row)

    def checkpoint(
        self,
        connection: Connection,
        obj: StoredObject,
        owner: str,
        progress: Progress,
        now: datetime,
    ) -> None:
        """Record progress inside the caller's transaction (the one adding the work it covers):
        its ``connection`` is required, since progress without that work would skip it."""
        statement = self._owned(obj, owner).values(updated_at=now, **_progress_values(progress))
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise FileTakenOver(f"{obj.url} was taken over by a newer run")

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
        connection: Connection | None = None,
    ) -> None:
        """Record the outcome; raise ``FileTakenOver`` if a newer run owns the row."""
        statement = self._owned(obj, owner).values(
            status=status, checksum=checksum, result=result, updated_at=now, finished_at=now,
            last_error=error[:MAX_ERROR_CHARS] or None, owner=None, **_progress_values(progress),
        )  # fmt: skip
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise FileTakenOver(f"{obj.url} was taken over by a newer run")

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
        statement = self._owned(obj, owner).values(
            last_error=error[:MAX_ERROR_CHARS], updated_at=now
        )
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
        statement = self._owned(obj, owner).values(
            status=FileStatus.SKIPPED, last_error=reason[:MAX_ERROR_CHARS], owner=None,
            updated_at=now, finished_at=now,
        )  # fmt: skip
        with self._write(connection) as conn:
            if conn.execute(statement).rowcount != 1:
                raise FileTakenOver(f"{obj.url} was taken over by a newer run")

    def owned_progress(
        self, obj: StoredObject, owner: str, *, connection: Connection | None = None
    ) -> Progress | None:
        """The progress recorded by ``owner``'s run, while it still owns the row."""
        query = self._owned_select(obj, owner)
        with self._read(connection) as conn:
            row = conn.execute(query).first()
        return FileRow.from_row(row).progress if row else None

    def get(
        self, bucket: str, name: str, generation: int, *, connection: Connection | None = None
    ) -> FileRow | None:
        obj = StoredObject(bucket, name, generation)
        with self._read(connection) as conn:
            row = conn.execute(self._select(obj)).first()
        return FileRow.from_row(row) if row else None

    def list(
        self,
        status: FileStatus | None = None,
        limit: int = 50,
        *,
        connection: Connection | None = None,
    ) -> Sequence[FileRow]:
        """Most recently updated first."""
        query = select(files).order_by(files.c.updated_at.desc()).limit(limit)
        if status is not None:
            query = query.where(files.c.status == status)
        with self._read(connection) as conn:
            return [FileRow.from_row(row) for row in conn.execute(query)]

    def _select(self, obj: StoredObject) -> Any:
        return select(files).where(self._identity(obj))

    def _owned(self, obj: StoredObject, owner: str) -> Update:
        return update(files).where(self._owned_by(obj, owner))

    def _owned_select(self, obj: StoredObject, owner: str) -> Any:
        return select(files).where(self._owned_by(obj, owner))

    def _owned_by(self, obj: StoredObject, owner: str) -> Any:
        return and_(
            self._identity(obj), files.c.owner == owner, files.c.status == FileStatus.RUNNING
        )

    @staticmethod
    def _identity(obj: StoredObject) -> Any:
        return and_(
            files.c.bucket == obj.bucket,
            files.c.name == obj.name,
            files.c.generation == obj.generation,
        )
