"""The hot statements (a delivery's claim and finish, a sweep batch's claim and done), compiled
once per dialect and run on the driver's own cursor (on a PostgreSQL connection in autocommit, a
delivery's claim and finish go straight to libpq instead: ``consumer.db.direct``).

They run thousands of times a second. ``Connection.execute`` spends about a third of their CPU on
work that never changes between runs: the compiled-cache lookup, parameter processing, the
execution context and the result's set-up. A ``Prepared`` statement is compiled once, binds its
values through its column types' own processors (JSON, UTC datetimes), and runs on the DBAPI
cursor of the SQLAlchemy ``Connection`` it is given, inside that connection's transaction, or
alone when the driver connection is in autocommit. On psycopg the cursor is kept with the
connection, and values and rows travel in PostgreSQL's binary format. A driver fault is
translated as SQLAlchemy translates it: a ``DBAPIError``, and a dead connection invalidated (it
reconnects on its next use), so ``unavailable_on_db_fault`` and ``retry_on_stale`` treat it
exactly as a fault of any other statement. Rows come back as the driver makes them (no result
processing: aware datetimes in the session's zone on PostgreSQL).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import JSON, Connection, Dialect
from sqlalchemy.exc import DBAPIError, StatementError

Build = Callable[[str], Any]
"""A function of the dialect's name returning a SQLAlchemy statement."""


@dataclass(frozen=True)
class Prepared:
    """One statement compiled for one dialect: its SQL text, the values of its constant binds,
    and the conversions its bind types apply to values."""

    sql: str
    defaults: Mapping[str, Any]
    processors: Mapping[str, Callable[[Any], Any]]
    positions: tuple[str, ...] | None
    """Bind names in order, for a positional paramstyle (SQLite's ``?``, psycopg's ``%s``)."""
    binary: bool
    """psycopg: values and rows travel in PostgreSQL's binary format, on a kept cursor."""

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> Prepared:
        binary = dialect.driver == "psycopg"
        # psycopg: positional placeholders, so a run passes a tuple the driver takes as it is
        # (named ones are matched to the dictionary's keys on every run).
        compiled = statement.compile(dialect=_positional(dialect) if binary else dialect)
        processors = {}
        for bind, name in compiled.bind_names.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if binary and isinstance(bind.type, JSON):
                # The text itself, cast to JSON by the statement: psycopg's JSON dumper is
                # Python code wrapped around the same ``json.dumps`` (``None`` is JSON null).
                process = getattr(dialect, "_json_serializer", None) or json.dumps
            if process is not None:
                processors[name] = process
        positions = tuple(compiled.positiontup) if compiled.positional else None
        return cls(compiled.string, dict(compiled.params), processors, positions, binary)

    def first(self, connection: Connection, values: Mapping[str, Any]) -> Any:
        """The first row the statement returns, or ``None``."""
        return self._run(connection, values, lambda cursor: cursor.fetchone())

    def all(self, connection: Connection, values: Mapping[str, Any]) -> list[Any]:
        return self._run(connection, values, lambda cursor: cursor.fetchall())

    def rowcount(self, connection: Connection, values: Mapping[str, Any]) -> int:
        """How many rows the statement changed."""
        return self._run(connection, values, lambda cursor: cursor.rowcount)

    def args(self, values: Mapping[str, Any]) -> Any:
        """``values`` (with the constant binds) converted and laid out for the driver."""
        params = {**self.defaults, **values}
        for name, process in self.processors.items():
            params[name] = process(params[name])
        return params if self.positions is None else tuple(params[n] for n in self.positions)

    def _run(
        self, connection: Connection, values: Mapping[str, Any], read: Callable[[Any], Any]
    ) -> Any:
        args = self.args(values)
        pooled = connection.connection
        driver = pooled.dbapi_connection
        assert driver is not None  # a connection in use is checked out
        if not connection.in_transaction() and not autocommits(driver):
            connection.begin()  # as ``execute`` begins one: the caller commits it
        try:
            if not self.binary:
                cursor = driver.cursor()
                try:
                    cursor.execute(self.sql, args)
                    return read(cursor)
                finally:
                    cursor.close()  # before any invalidation: a closed connection refuses it
            cursor = _kept_cursor(pooled.info, driver)
            cursor.execute(self.sql, args, binary=True)
            return read(cursor)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise translated(connection, driver, self.sql, args, exc) from exc


Step = tuple[Prepared, Mapping[str, Any], Callable[[Any], Any]]
"""A statement, its values, and what to read of its cursor (e.g. ``fetchone``)."""


def pipelined(connection: Connection, steps: Sequence[Step]) -> list[Any]:
    """Each step's statement in turn, in the connection's transaction, and what was read of each.
    On psycopg they travel in one round trip (pipeline mode): the server still runs them one
    after another, each with a snapshot of its own taken when it starts."""
    pooled = connection.connection
    driver = pooled.dbapi_connection
    assert driver is not None  # a connection in use is checked out
    if not all(prepared.binary for prepared, _, _ in steps):
        return [prepared._run(connection, values, read) for prepared, values, read in steps]
    if not connection.in_transaction() and not autocommits(driver):
        connection.begin()
    cursors = _kept_cursors(pooled.info, driver, len(steps))
    sent = [(prepared.sql, prepared.args(values)) for prepared, values, _ in steps]
    try:
        with driver.pipeline():
            for cursor, (sql, args) in zip(cursors, sent, strict=True):
                cursor.execute(sql, args, binary=True)
        return [read(cursor) for cursor, (_, _, read) in zip(cursors, steps, strict=True)]
    except connection.dialect.loaded_dbapi.Error as exc:
        # A pipeline's fault surfaces at its end, whichever statement it came from: all are named.
        statements = ";\n".join(sql for sql, _ in sent)
        raise translated(connection, driver, statements, [args for _, args in sent], exc) from exc


def autocommits(driver: Any) -> bool:
    """Whether the driver connection commits each statement itself (psycopg's ``autocommit``;
    never on SQLite here): a statement run on it needs no transaction of SQLAlchemy's."""
    return getattr(driver, "autocommit", False) is True


def on_autocommit(connection: Connection) -> bool:
    """Whether ``connection`` (reconnected first if it was invalidated) is in autocommit."""
    return autocommits(connection.connection.dbapi_connection)


_CURSOR = "consumer.prepared.cursor"


def _kept_cursor(info: dict[Any, Any], driver: Any) -> Any:
    """One psycopg cursor per driver connection, kept in the pool record's ``info`` (it follows
    the connection across checkouts): a new cursor and its close cost more CPU than the binary
    claim itself. A reconnected record holds a new driver connection, so the kept pair is
    checked against it; psycopg reads a result whole, so a kept cursor holds no server state."""
    kept = info.get(_CURSOR)
    if kept is None or kept[0] is not driver:
        kept = info[_CURSOR] = (driver, driver.cursor())
    return kept[1]


_CURSORS = "consumer.prepared.cursors"


def _kept_cursors(info: dict[Any, Any], driver: Any, count: int) -> list[Any]:
    """``count`` kept cursors of ``driver`` for a pipeline, whose results stay apart until read
    (as ``_kept_cursor``)."""
    kept = info.get(_CURSORS)
    if kept is None or kept[0] is not driver or len(kept[1]) < count:
        kept = info[_CURSORS] = (driver, [driver.cursor() for _ in range(count)])
    return kept[1][:count]


def translated(
    connection: Connection, driver: Any, statement: str, args: Any, exc: Exception
) -> StatementError:
    """``exc`` as SQLAlchemy raises a driver fault. A fault that killed the connection retires
    the pool as SQLAlchemy's own statements do: this connection reconnects on its next use
    (``retry_on_stale`` relies on it), and every connection pooled before it on its next
    checkout (after a restart they are all dead; each would otherwise fail one more delivery)."""
    dialect = connection.dialect
    gone = dialect.is_disconnect(cast(Any, exc), driver, None)
    if gone and not connection.invalidated:
        connection.engine.pool._invalidate(connection.connection, exc)
        connection.invalidate(exc)
    return DBAPIError.instance(
        statement, args, exc, dialect.loaded_dbapi.Error, connection_invalidated=gone,
        dialect=dialect,
    )  # fmt: skip


def _positional(dialect: Dialect) -> Dialect:
    """A copy of ``dialect`` (its server version and features included) with ``%s``
    placeholders, which psycopg takes as well as named ones."""
    twin = copy.copy(dialect)
    twin.paramstyle, twin.positional = "format", True
    return twin


_COMPILED: dict[tuple[Build, str, str, str], Prepared] = {}


def prepared(build: Build, dialect: Dialect) -> Prepared:
    """``build(dialect.name)`` compiled on first use, per dialect, driver and paramstyle."""
    key = (build, dialect.name, dialect.driver, dialect.paramstyle)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED.setdefault(key, Prepared.compile(build(dialect.name), dialect))
    return found
