"""``TickControl``: the operator's pauses of tick tasks (the ``tick_control`` table). A delivery
reads them, and its task's live runs, through its own ``Inbox`` (``paused``, ``run_holder``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.ticks import queries


@dataclass(frozen=True)
class Pause:
    """A paused tick task: when, by whom, and why (``tick_control``)."""

    task: str
    paused_at: datetime
    paused_by: str
    reason: str

    @classmethod
    def from_row(cls, row: Any) -> Pause:
        return cls(**dict(row._mapping))


class TickControl(Store):
    """Pause, resume, and list the paused tasks."""

    def pause(
        self,
        task: str,
        now: datetime,
        by: str,
        reason: str = "",
        *,
        connection: Connection | None = None,
    ) -> bool:
        """Pause ``task``; ``False`` if it was paused already (that pause is kept)."""
        with self._write(connection) as conn:
            return (
                conn.execute(queries.pause(self.dialect, task, now, by, reason)).first() is not None
            )

    def resume(self, task: str, *, connection: Connection | None = None) -> bool:
        """``False`` if ``task`` was not paused."""
        with self._write(connection) as conn:
            return conn.execute(queries.resume(task)).rowcount == 1

    def all_paused(self, *, connection: Connection | None = None) -> Sequence[Pause]:
        with self._read(connection) as conn:
            return [Pause.from_row(row) for row in conn.execute(queries.ALL_PAUSED)]
