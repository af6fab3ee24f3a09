"""``TickStore``: what a tick's delivery reads and writes beside its inbox row (the completed
slot, the task's pause, the run that holds the task), on the delivery's own connection when bound
to it (``on``), as the inbox is."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from consumer.db.store import BoundStore
from consumer.ticks import queries
from consumer.ticks.pauses import Pause


class TickStore(BoundStore):
    """Named queries over ``tick_progress``, ``tick_control`` and ``tick_runs`` for one run."""

    def last_slot(self, task: str, *, connection: Connection | None = None) -> datetime | None:
        with self._read(connection) as conn:
            return conn.execute(queries.last_slot(task)).scalar()

    def advance_slot(
        self, task: str, slot: datetime, schedule: str, *, connection: Connection | None = None
    ) -> None:
        """Remember the latest completed slot and the schedule it ran under (``str`` of a
        ``Schedule``); never move it backwards."""
        with self._write(connection) as conn:
            conn.execute(queries.advance_slot(self.dialect, task, slot, schedule))

    def paused(self, task: str, *, connection: Connection | None = None) -> Pause | None:
        with self._read(connection) as conn:
            row = conn.execute(queries.paused(task)).first()
        return Pause.from_row(row) if row else None

    def take_run(
        self, task: str, key: str, lease_until: datetime, now: datetime,
        *, connection: Connection | None = None,
    ) -> bool:  # fmt: skip
        """Hold ``task`` for the run of ``key`` until ``lease_until``; ``False`` if another
        run's lease is live (``run_holder`` says which)."""
        statement = queries.take_run(self.dialect, task, key, lease_until, now)
        with self._write(connection) as conn:
            return conn.execute(statement).first() is not None

    def run_holder(
        self, task: str, now: datetime, *, connection: Connection | None = None
    ) -> str | None:
        with self._read(connection) as conn:
            return conn.execute(queries.run_holder(task, now)).scalar()

    def renew_run(
        self, task: str, key: str, lease_until: datetime, *, connection: Connection | None = None
    ) -> None:
        with self._write(connection) as conn:
            conn.execute(queries.renew_run(task, key, lease_until))

    def release_run(self, task: str, key: str, *, connection: Connection | None = None) -> None:
        """Let the next run take ``task`` (a run that died lets go when its lease ends)."""
        with self._write(connection) as conn:
            conn.execute(queries.release_run(task, key))
