"""Rows of the partitioned inbox placed by hand, for the retention tests: weeks far enough ahead
of the real clock to lie past ``inbox_legacy``'s range, rows inserted with an explicit
``placed_at``, and where a key's row lives."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy import Engine, insert, text

from consumer.inbox.model import Status
from consumer.inbox.schema import inbox

WEEK = timedelta(days=7)


def monday(weeks_ahead: int) -> datetime:
    """The Monday 00:00 UTC ``weeks_ahead`` weeks after this week's (past the migration's
    ``inbox_legacy`` range from about 3 on)."""
    today = datetime.now(UTC).date()
    this_week = datetime.combine(today - timedelta(days=today.weekday()), time(), UTC)
    return this_week + weeks_ahead * WEEK


def place(engine: Engine, key: str, status: Status, placed_at: datetime, **times: Any) -> None:
    """One row of ``key`` in ``placed_at``'s partition; ``times``: its timestamps (by default
    all ``placed_at``, finished when ``status`` is final)."""
    at = times.pop("at", placed_at)
    values = {
        "key": key, "route": "job", "status": status, "attempts": 1, "message_id": key,
        "message": {"messageId": key, "format": "wrapped"}, "created_at": at, "updated_at": at,
        "finished_at": None if status in (Status.RUNNING, Status.FAILED) else at,
        "placed_at": placed_at, **times,
    }  # fmt: skip
    with engine.begin() as connection:
        connection.execute(insert(inbox).values(values))


def where(engine: Engine, key: str) -> list[tuple[str, datetime, str]]:
    """Every row of ``key``: its partition, ``placed_at`` and status."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT tableoid::regclass::text, placed_at, status FROM inbox WHERE key = :key"),
            {"key": key},
        )
        return [(row[0], row[1], row[2]) for row in rows]


def partition_names(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return list(
            connection.scalars(
                text(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                    " WHERE i.inhparent = 'inbox'::regclass ORDER BY 1"
                )
            )
        )
