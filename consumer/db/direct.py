"""The hottest statements (a delivery's claim and finish) sent straight to libpq, prepared once
per connection on the server.

``consumer.db.prepared`` runs a statement on a kept psycopg cursor; per run, the cursor still
converts the query, looks up each value's dumper, checks its own prepared-statement cache and
builds a result object, and the server parses and plans the statement again. Here, on a psycopg
connection in autocommit, a ``Direct`` statement is prepared once per connection (``PREPARE``
through libpq, under a name of its own), and each run dumps its values with dumpers fixed per
position (one psycopg ``Transformer`` per statement and connection, set to the parameter types
the server inferred) and calls ``PQexecPrepared``. Rows come back in PostgreSQL's binary format,
loaded by the same transformer.

A prepared statement lives as long as its server session. A new driver connection (a
reconnection) prepares again, and so does a connection whose statement the server no longer
knows (``DEALLOCATE ALL`` or ``DISCARD ALL`` run on it) or whose cached plan a schema change
invalidated: the run prepares it again and retries once. Any other fault is translated as
``consumer.db.prepared`` translates one: a ``DBAPIError``, and a dead connection retires the pool.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg import errors, generators, pq
from psycopg.adapt import Transformer
from sqlalchemy import JSON, Connection, Dialect

from consumer.db.prepared import Build, translated

ExecStatus = pq.ExecStatus
BINARY = pq.Format.BINARY
TEXT_OID = 25
JSON_OID = 114
STALE = {"26000", "0A000"}
"""SQLSTATEs that mean the connection's prepared statement is gone (``invalid_sql_statement_name``)
or its plan no longer fits the table (``feature_not_supported``: "cached plan must not change
result type"): prepare it again."""


@dataclass(frozen=True)
class Direct:
    """One statement compiled for PostgreSQL with ``$n`` placeholders (a bind used twice is sent
    once), its bind names in order, and the conversions its bind types apply to values."""

    name: str
    """The server-side statement's name, the same on every connection."""
    sql: str
    positions: tuple[str, ...]
    processors: Mapping[int, Callable[[Any], Any]]
    """Position -> conversion (UTC datetimes; JSON values serialized, as SQLAlchemy's ``JSON``
    serializes them: ``None`` is JSON ``null``)."""
    json_positions: frozenset[int]

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect, name: str) -> Direct:
        twin = copy.copy(dialect)
        twin.paramstyle, twin.positional = "numeric_dollar", True
        compiled = statement.compile(dialect=twin)
        positions = tuple(compiled.positiontup or ())
        serialize = getattr(dialect, "_json_serializer", None) or json.dumps
        binds = {bind_name: bind for bind, bind_name in compiled.bind_names.items()}
        processors: dict[int, Callable[[Any], Any]] = {}
        json_positions = set()
        for index, bind_name in enumerate(positions):
            kind = binds[bind_name].type
            if isinstance(kind, JSON):
                processors[index] = serialize
                json_positions.add(index)
                continue
            process = kind.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors[index] = process
        return cls(name, compiled.string, positions, processors, frozenset(json_positions))

    def first(self, connection: Connection, values: Mapping[str, Any]) -> Any:
        """The first row the statement returns, as a tuple, or ``None``."""
        result, transformer = self._run(connection, values)
        if result.ntuples == 0:
            return None
        return transformer.load_row(0, tuple)

    def rowcount(self, connection: Connection, values: Mapping[str, Any]) -> int:
        """How many rows the statement changed."""
        result, _ = self._run(connection, values)
        return result.command_tuples or 0

    def args(self, values: Mapping[str, Any]) -> list[Any]:
        args = [values[name] for name in self.positions]
        for index, process in self.processors.items():
            args[index] = process(args[index])
        return args

    def _run(self, connection: Connection, values: Mapping[str, Any]) -> tuple[Any, Any]:
        args = self.args(values)
        pooled = connection.connection
        driver = pooled.dbapi_connection
        assert driver is not None  # a connection in use is checked out
        try:
            session = _session(pooled.info, driver)
            try:
                return session.run(self, args)
            except errors.Error as exc:
                if exc.sqlstate not in STALE:
                    raise
                session.forget(self)
                return session.run(self, args)
        except connection.dialect.loaded_dbapi.Error as exc:
            raise translated(connection, driver, self.sql, args, exc) from exc


class _Session:
    """What one driver connection prepared: per statement name, its transformer, set to the
    statement's parameter and column types."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.pgconn = driver.pgconn
        self.encoding = driver.info.encoding
        self.prepared: dict[str, Any] = {}

    def run(self, statement: Direct, args: list[Any]) -> tuple[Any, Any]:
        transformer = self.prepared.get(statement.name)
        if transformer is None:
            transformer = self.prepare(statement)
        params = transformer.dump_sequence(args, ())
        result = self.pgconn.exec_prepared(
            statement.name.encode(), params, transformer.formats, BINARY
        )
        if result.status == ExecStatus.TUPLES_OK:
            transformer.set_pgresult(result, set_loaders=False)
        elif result.status != ExecStatus.COMMAND_OK:
            raise errors.error_from_result(result, encoding=self.encoding)
        return result, transformer

    def prepare(self, statement: Direct) -> Any:
        """``PREPARE`` the statement (the server infers its parameters' types from the casts in
        its SQL) and a transformer set to the types it reports."""
        name = statement.name.encode()
        result = self.pgconn.prepare(name, statement.sql.encode(self.encoding))
        if (
            result.status == ExecStatus.FATAL_ERROR
            and result.error_field(pq.DiagnosticField.SQLSTATE) == b"42P05"
        ):  # a name left on the session by an earlier state: replaced
            self._check(self.pgconn.exec_(b"DEALLOCATE " + name))
            result = self.pgconn.prepare(name, statement.sql.encode(self.encoding))
        self._check(result)
        described = self._check(self._describe(name))
        params = [described.param_type(i) for i in range(described.nparams)]
        for index in statement.json_positions:  # serialized already: the text is the value
            if params[index] == JSON_OID:
                params[index] = TEXT_OID
        transformer = Transformer(self.driver)
        transformer.set_dumper_types(params, BINARY)
        transformer.set_loader_types([described.ftype(i) for i in range(described.nfields)], BINARY)
        self.prepared[statement.name] = transformer
        return transformer

    def _describe(self, name: bytes) -> Any:
        """The prepared statement's parameter and column types. Not ``pgconn.describe_prepared``:
        psycopg's binding of it holds the GIL while libpq waits for the server, which stops every
        other thread of the process for the round trip (a heartbeat, the watchdog, and in the fault
        tests the in-process TCP proxy that would forward the answer: it never came). Sent, then
        awaited as psycopg awaits any query, with the GIL released."""
        self.pgconn.send_describe_prepared(name)
        results = self.driver.wait(generators.execute(self.pgconn))
        return results[-1]

    def forget(self, statement: Direct) -> None:
        """The server lost the statement (or its plan no longer fits): dropped where it may
        remain, and prepared again on the next run."""
        self.prepared.pop(statement.name, None)
        self.pgconn.exec_(b"DEALLOCATE " + statement.name.encode())  # absent: a harmless error

    def _check(self, result: Any) -> Any:
        if result.status not in (ExecStatus.COMMAND_OK, ExecStatus.TUPLES_OK):
            raise errors.error_from_result(result, encoding=self.encoding)
        return result


_SESSION = "consumer.direct.session"


def _session(info: dict[Any, Any], driver: Any) -> _Session:
    """The driver connection's prepared statements, kept in the pool record's ``info`` (it
    follows the connection across checkouts); a reconnected record holds a new driver
    connection, whose session starts empty."""
    kept = info.get(_SESSION)
    if kept is None or kept.driver is not driver:
        kept = info[_SESSION] = _Session(driver)
    return kept


_COMPILED: dict[Build, Direct] = {}


def direct(build: Build, dialect: Dialect) -> Direct | None:
    """``build("postgresql")`` compiled on first use, named after ``build``; ``None`` where
    libpq is not the driver's (SQLite)."""
    if dialect.name != "postgresql" or dialect.driver != "psycopg":
        return None
    found = _COMPILED.get(build)
    if found is None:
        name = f"consumer_{build.__module__.rsplit('.', 2)[-2]}_{build.__name__}"
        found = _COMPILED.setdefault(build, Direct.compile(build(dialect.name), dialect, name))
    return found
