"""The base of every store: a class per table group, built on an engine.

A store's methods take an optional ``connection`` keyword: given one, the statement joins the
caller's transaction (it commits or rolls back with the caller's own work); without one, the
method opens its own and commits it. Database outages become ``Unavailable`` either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from sqlalchemy import Connection, Engine

from consumer.db.engine import unavailable_on_db_fault


class Store:
    """Named queries over one table group."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    @contextmanager
    def _write(self, connection: Connection | None = None) -> Iterator[Connection]:
        """The caller's connection as it is, or a transaction of our own, committed on exit."""
        with unavailable_on_db_fault():
            if connection is not None:
                yield connection
            else:
                with self.engine.begin() as own:
                    yield own

    @contextmanager
    def _read(self, connection: Connection | None = None) -> Iterator[Connection]:
        """The caller's connection as it is, or a connection of our own, for reads."""
        with unavailable_on_db_fault():
            if connection is not None:
                yield connection
            else:
                with self.engine.connect() as own:
                    yield own


class BoundStore(Store):
    """A store that can be bound to one connection (``on``): its statements then each run in a
    transaction of their own on that checkout (a delivery's claim, finish and the tick rules'
    statements share it). Without a binding, as ``Store``."""

    def __init__(self, engine: Engine, connection: Connection | None = None) -> None:
        super().__init__(engine)
        self.connection = connection

    def on(self, connection: Connection) -> Self:
        """The same queries on one connection. After a fault the connection reconnects on its
        next use, so a retry needs no new checkout."""
        return type(self)(self.engine, connection)

    @contextmanager
    def _write(self, connection: Connection | None = None) -> Iterator[Connection]:
        """The caller's connection as it is; else a transaction on the bound connection, or on
        one checked out for it. One flat block: the claim and finish of every delivery pass
        here."""
        with unavailable_on_db_fault():
            if connection is not None:
                yield connection
            elif self.connection is None:
                with self.engine.begin() as own:
                    yield own
            else:
                with self.connection.begin():
                    yield self.connection

    # Reads too: on the bound connection a read must end its transaction before the next begins.
    _read = _write
