"""Every SQL statement on ``processed_files``, each named once; ``ProcessedFiles`` runs them.

A run owns its row through an ``owner`` token: ``begin`` hands the row to the newest run, and
every later write says ``WHERE ... AND owner = ? AND status = 'running'`` (``owned_write``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Select, Update, and_, select, update

from consumer.db import dialect as sql
from consumer.storage.model import FileStatus, StoredObject
from consumer.storage.schema import processed_files as files


def begin(dialect: str, row: Mapping[str, Any]) -> Any:
    """Insert the row of a new run, or hand a ``running`` row to this run's owner (one more
    attempt); returns the row, or nothing when the file is finished."""
    return sql.upsert(
        files,
        dialect,
        row,
        conflict=[files.c.bucket, files.c.name, files.c.generation],
        set_=lambda excluded: {
            "owner": excluded.owner,
            "attempts": files.c.attempts + 1,
            "processor": excluded.processor,
            "updated_at": excluded.updated_at,
        },
        where=lambda excluded: files.c.status == FileStatus.RUNNING,
    ).returning(*files.c)


def by_identity(obj: StoredObject) -> Select[Any]:
    """The row of one generation of one object."""
    return select(files).where(_identity(obj))


def owned_row(obj: StoredObject, owner: str) -> Select[Any]:
    """The row, while ``owner``'s run still owns it."""
    return select(files).where(_owned_by(obj, owner))


def owned_write(
    obj: StoredObject, owner: str, values: Mapping[str, Any], at: tuple[int, int] | None = None
) -> Update:
    """``values`` written to the row while ``owner``'s run owns it and, given ``at``, while its
    resume point is ``at`` (line, offset): what this run last committed (zero rows: taken over,
    or a commit of this run's was lost)."""
    owned = _owned_by(obj, owner)
    if at is not None:
        owned = and_(owned, files.c.resume_line == at[0], files.c.resume_offset == at[1])
    return update(files).where(owned).values(**values)


def listed(status: FileStatus | None, limit: int) -> Select[Any]:
    """Most recently updated first, of one status or all."""
    query = select(files).order_by(files.c.updated_at.desc()).limit(limit)
    if status is not None:
        query = query.where(files.c.status == status)
    return query


def _owned_by(obj: StoredObject, owner: str) -> Any:
    return and_(_identity(obj), files.c.owner == owner, files.c.status == FileStatus.RUNNING)


def _identity(obj: StoredObject) -> Any:
    return and_(
        files.c.bucket == obj.bucket,
        files.c.name == obj.name,
        files.c.generation == obj.generation,
    )
