"""The base of every store: a class per table group, built on an engine.

A store's methods take an optional ``connection`` keyword: given one, the statement joins the
caller's transaction (it commits or rolls back with the caller's own work); without one, the
method opens its own and commits it. Database outages become ``Unavailable`` either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
