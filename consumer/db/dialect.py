"""The statements whose SQL differs between PostgreSQL and SQLite, written once for every store.

Each helper takes the dialect's name (``connection.dialect.name``), so a statement can be built
once per dialect and cached, and returns an ordinary SQLAlchemy statement or clause.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Delete, Table, any_, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.types import TypeEngine

POSTGRESQL = "postgresql"

Insert = postgresql.Insert | sqlite.Insert
"""An ``INSERT`` that knows ``ON CONFLICT`` (both dialects spell it the same way)."""


def insert(table: Table, dialect: str) -> Insert:
    """``INSERT INTO table`` with the dialect's ``ON CONFLICT`` clauses."""
    return (postgresql.insert if dialect == POSTGRESQL else sqlite.insert)(table)


def insert_ignore(table: Table, dialect: str) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING``: a row whose unique key exists is skipped, and the
    database decides, so concurrent writers cannot both insert it."""
    return insert(table, dialect).on_conflict_do_nothing()


def upsert(
    table: Table,
    dialect: str,
    values: Mapping[str, Any],
    conflict: Sequence[Any],
    set_: Callable[[Any], Mapping[str, Any]],
    where: Callable[[Any], ColumnElement[bool]] | None = None,
) -> Insert:
    """``INSERT ... ON CONFLICT (conflict) DO UPDATE SET ... [WHERE ...]``. ``set_`` and ``where``
    receive the ``excluded`` row (the values that were refused), to say what to keep of it."""
    statement = insert(table, dialect).values(**values)
    excluded = statement.excluded
    return statement.on_conflict_do_update(
        index_elements=list(conflict),
        set_=dict(set_(excluded)),
        where=None if where is None else where(excluded),
    )


def purge(table: Table, key: Any, expired: ColumnElement[bool], limit: int | None = None) -> Delete:
    """Delete the rows that match ``expired``; with a ``limit``, at most that many (picked by their
    ``key`` column), so callers can loop in short transactions that hold no lock for long."""
    if limit is None:
        return delete(table).where(expired)
    chunk = select(key).where(expired).limit(limit).scalar_subquery()
    return delete(table).where(key.in_(chunk))


def among(
    column: Any, name: str, dialect: str, element: TypeEngine[Any] | None = None
) -> ColumnElement[bool]:
    """``column = ANY(:name)`` with one array parameter on PostgreSQL (one statement text,
    whatever the list's length, so it is prepared once); an expanding ``IN`` list on SQLite.
    ``element``: the array's element type, when not the column's own."""
    if dialect == POSTGRESQL:
        array = postgresql.ARRAY(element if element is not None else column.type)
        return column == any_(bindparam(name, type_=array))
    return column.in_(bindparam(name, expanding=True))
