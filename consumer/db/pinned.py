"""One autocommit connection per thread, kept from one delivery to the next.

A delivery's claim and finish are single-statement writes on one connection. Checking that
connection out of the pool for each delivery, switching it to autocommit and resetting it on
return cost about half as much CPU as one of the two statements. A thread keeps its connection
instead: a gunicorn sync worker has one thread, the asyncio worker a fixed pool of them. Kept
connections never go back to the pool, so at most ``limit`` threads of an engine keep one (all
but one of the pool's base size, whatever the number of dispatchers on it); the others check one
out per delivery as before, and the overflow stays free for the handlers' own connections.

A connection that met a fault is dropped (closed) and the thread's next delivery takes a new
one; within a delivery, an invalidated connection reconnects on its next use as any SQLAlchemy
``Connection`` does (``retry_on_stale``), and gets autocommit back on the delivery after. The
connections are closed when their owner is collected or the process exits, so none is left for
the garbage collector to find open.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine

_ATTRIBUTE = "_consumer_pinned_connections"
_CREATING = threading.Lock()


class PinnedConnections:
    """The kept connections of an engine's threads, each in autocommit."""

    @classmethod
    def of(cls, engine: Engine) -> PinnedConnections:
        """The engine's own: every dispatcher on an engine shares them, so ``limit`` holds for
        the engine's pool however many dispatchers use it (kept on the engine, collected with
        it)."""
        with _CREATING:
            found = engine.__dict__.get(_ATTRIBUTE)
            if found is None:
                found = cls(engine)
                setattr(engine, _ATTRIBUTE, found)
            return found

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        size = getattr(engine.pool, "size", None)
        self.limit = max(1, size() - 1) if callable(size) else 1
        self._local = threading.local()
        self._by_thread: dict[int, Connection] = {}
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._by_thread, self._lock)

    def kept(self) -> int:
        """How many threads keep a connection now."""
        with self._lock:
            return len(self._by_thread)

    def connection(self) -> AbstractContextManager[Connection]:
        """This thread's connection, in autocommit; dropped if anything raises while in use."""
        return self._kept(autocommit=True)

    def transaction(self) -> AbstractContextManager[Connection]:
        """This thread's connection out of autocommit, for a transaction block its caller
        begins and ends (a one-commit delivery); in autocommit again for the next delivery."""
        return self._kept(autocommit=False)

    def _kept(self, autocommit: bool) -> AbstractContextManager[Connection]:
        pinned: _Pinned | None = getattr(self._local, "pinned", None)
        if pinned is not None and pinned.in_use:  # asked again inside a use: never share it
            return self._checked_out(autocommit)
        if pinned is None or pinned.connection.closed:
            pinned = self._local.pinned = self._pin()
        if pinned is None:
            return self._checked_out(autocommit)
        if autocommit:
            pinned.autocommit()
        else:
            pinned.transactional()
        return pinned

    @contextmanager
    def _checked_out(self, autocommit: bool) -> Iterator[Connection]:
        """A connection of the pool's for one delivery, when ``limit`` threads keep one."""
        with self.engine.connect() as connection:
            if autocommit:
                connection.execution_options(isolation_level="AUTOCOMMIT")
            yield connection

    def _drop(self, pinned: _Pinned) -> None:
        """A kept connection that met a fault: closed, and the thread's next delivery pins a
        new one."""
        self._local.pinned = None
        self._unpin(pinned.connection)

    def _pin(self) -> _Pinned | None:
        """A new kept connection for this thread, or ``None`` when ``limit`` threads keep one.
        Connections of threads that ended are closed first: nobody will use them again (one
        under this thread's ident is such: this thread keeps none, or it would not ask)."""
        with self._lock:
            alive = {thread.ident for thread in threading.enumerate()}
            alive.discard(threading.get_ident())  # an ended thread's ident can be reused
            for ident in [ident for ident in self._by_thread if ident not in alive]:
                _close(self._by_thread.pop(ident))
            if len(self._by_thread) >= self.limit:
                return None
            connection = self._by_thread[threading.get_ident()] = self.engine.connect()
        return _Pinned(self, connection)

    def _unpin(self, connection: Connection) -> None:
        with self._lock:
            if self._by_thread.get(threading.get_ident()) is connection:
                del self._by_thread[threading.get_ident()]
        _close(connection)


class _Pinned:
    """A kept connection, the driver connection it last set, and to which mode. A context
    manager (a class: every delivery enters one) that yields the connection, drops it if
    anything raises while in use, and rolls back a transaction left open."""

    def __init__(self, owner: PinnedConnections, connection: Connection) -> None:
        self.owner = owner
        self.connection = connection
        self._driver: Any = None
        self._autocommit = False
        self.in_use = False
        """Entered and not yet left: a use nested in it (a handler's ``enqueue`` inside a
        one-commit delivery's transaction) gets a pool connection, never this one switched to
        autocommit under the transaction."""

    def __enter__(self) -> Connection:
        self.in_use = True
        return self.connection

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None
    ) -> None:
        self.in_use = False
        if exc is not None:
            self.owner._drop(self)
        elif self.connection.in_transaction():  # one SQLAlchemy began and nobody ended
            self.connection.rollback()

    def autocommit(self) -> None:
        """Autocommit on the current driver connection: a reconnection brings a new one, and a
        one-commit delivery left it off."""
        self._switch(True, "AUTOCOMMIT")

    def transactional(self) -> None:
        """Autocommit off: statements run in the transaction block the caller begins. A thread
        whose deliveries are all one-commit switches once."""
        self._switch(False, self.connection.default_isolation_level or "READ COMMITTED")

    def _switch(self, autocommit: bool, level: str) -> None:
        driver = self.connection.connection.dbapi_connection
        if driver is not self._driver or autocommit is not self._autocommit:
            self.connection.execution_options(isolation_level=level)
            self._driver, self._autocommit = driver, autocommit


def _close(connection: Connection) -> None:
    """Close the driver connection itself: the pool it came from may be disposed by now."""
    # Best effort: a finalizer must not raise, and a dead connection has nothing left to close.
    with contextlib.suppress(Exception):
        if not connection.closed:
            connection.invalidate()
            connection.close()


def _close_all(connections: dict[int, Connection], lock: threading.Lock) -> None:
    with lock:
        for connection in connections.values():
            _close(connection)
        connections.clear()
