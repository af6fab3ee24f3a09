"""Engine set-up for both databases, and the one place database faults become ``Unavailable``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from consumer.config.database import DatabaseWaits
from consumer.errors import Unavailable

SQLITE_BUSY_TIMEOUT_SECONDS = 30
POSTGRES_CONNECT_TIMEOUT_SECONDS = 5
SESSION_TIME_ZONE = "UTC"
SESSION_ISOLATION = "read\\ committed"  # libpq's options: a space in a value is escaped
NOT_TRANSIENT_SQLSTATE_CLASSES = ("22", "54")  # data exception, program limit exceeded
T = TypeVar("T")


def make_engine(url: str, waits: DatabaseWaits | None = None, **options: Any) -> Engine:
    """An engine tuned for many short transactions from several processes. ``waits``: the
    bounds of a server's waits (``Settings.database_waits``): PostgreSQL's statement, lock and
    idle-in-transaction timeouts on every connection, and the pool's checkout timeout (SQLite's
    writers wait at most its busy timeout); none for tools that may run long (migrations).

    No ``pool_pre_ping``: a ``SELECT 1`` on every checkout is a round trip per transaction. A
    connection that died while pooled fails on its first use instead, which invalidates the
    whole pool (every other pooled connection is replaced on its next checkout); callers retry
    what is safe to retry (``retry_on_stale``), the rest becomes a 503 and is redelivered."""
    if url.startswith("sqlite"):
        return _sqlite_engine(url, **options)
    options.setdefault("pool_size", 5)
    options.setdefault("max_overflow", 5)
    connect_args: dict[str, Any] = {
        "connect_timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS,
        "options": session_options(url, waits),
    }
    if waits is not None:
        options.setdefault("pool_timeout", waits.pool)
    return create_engine(url, connect_args=connect_args, **options)


def session_options(url: str, waits: DatabaseWaits | None) -> str:
    """libpq's ``options`` for every connection: the URL's own, the session's time zone, UTC
    (the driver then reads timestamps as UTC datetimes, with nothing to convert; a claim reads
    a hundred rows of them), READ COMMITTED whatever the database's default (the claim's
    lookup relies on it and refuses to run under another level), and ``waits``' timeouts."""
    given = make_url(url).query.get("options", ())
    parts = [given] if isinstance(given, str) else list(given)
    parts.append(f"-c TimeZone={SESSION_TIME_ZONE}")
    parts.append(f"-c default_transaction_isolation={SESSION_ISOLATION}")
    if waits is not None:
        parts.append(session_timeouts(waits))
    return " ".join(parts)


def session_timeouts(waits: DatabaseWaits) -> str:
    """libpq's ``options``: the server-side timeouts, set as each connection starts (no round
    trip of its own), in milliseconds."""
    timeouts = {
        "statement_timeout": waits.statement,
        "lock_timeout": waits.lock,
        "idle_in_transaction_session_timeout": waits.idle_in_transaction,
    }
    return " ".join(f"-c {name}={round(seconds * 1000)}" for name, seconds in timeouts.items())


def _sqlite_engine(url: str, **options: Any) -> Engine:
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "isolation_level": None},
        **options,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # WAL lets readers run beside the single writer; the busy timeout makes writers queue.
        dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")
        dbapi_connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SECONDS * 1000}")

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Take the write lock up front: a deferred transaction that later upgrades to a writer
        # fails with SQLITE_BUSY at once instead of waiting on the busy timeout.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def is_unavailable(exc: BaseException) -> bool:
    """True for faults of the database itself (down, unreachable, locked, a statement or a lock
    wait over its timeout), not of our SQL or our data: PostgreSQL's class 54 (a value over a
    program limit) is an OperationalError too, but retrying it can never succeed."""
    if isinstance(exc, DBAPIError) and sqlstate(exc).startswith(NOT_TRANSIENT_SQLSTATE_CLASSES):
        return False
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def sqlstate(exc: DBAPIError) -> str:
    """The driver's SQLSTATE code, or ``""`` (SQLite has none)."""
    return str(getattr(exc.orig, "sqlstate", "") or "")


def retry_on_stale(connection: Connection, operation: Callable[[], T]) -> T:
    """Run ``operation`` (which uses ``connection``) again, once, if its first try found the
    connection dead (invalidated: it reconnects on next use). Only for operations that had no
    effect if they failed: a read, or a claim made before anything ran."""
    try:
        return operation()
    except Unavailable:
        if not connection.invalidated:
            raise
    return operation()


class _UnavailableOnDbFault:
    """The context manager ``unavailable_on_db_fault`` returns: a class, not a generator, as a
    push enters it several times (a generator's set-up costs a few µs each time)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None
    ) -> None:
        if isinstance(exc, DBAPIError) and is_unavailable(exc):
            raise Unavailable(f"database unavailable: {type(exc.orig).__name__}") from exc
        if isinstance(exc, PoolTimeout):  # every connection of the pool busy past its timeout
            raise Unavailable("database unavailable: no free connection in the pool") from exc


_UNAVAILABLE_ON_DB_FAULT = _UnavailableOnDbFault()


def unavailable_on_db_fault() -> AbstractContextManager[None]:
    """Translate database outages into ``Unavailable`` (HTTP 503, Pub/Sub retries)."""
    return _UNAVAILABLE_ON_DB_FAULT
