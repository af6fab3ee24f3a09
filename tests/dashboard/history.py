"""An hour of activity written straight into the inbox and jobs tables (deliveries and finished
jobs at chosen minutes), for the plots' tests and their screenshot."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Engine, insert

from consumer.inbox.schema import inbox
from consumer.jobs.schema import jobs


def add_deliveries(engine: Engine, at: datetime, status: str, count: int, tag: str = "") -> None:
    rows = [
        {"key": f"history:{tag}{status}:{at.isoformat()}:{n}", "route": "other",
         "status": status, "attempts": 1, "message_id": str(n), "message": {},
         "created_at": at, "updated_at": at, "finished_at": at}
        for n in range(count)
    ]  # fmt: skip
    with engine.begin() as connection:
        connection.execute(insert(inbox), rows)


def add_jobs(engine: Engine, at: datetime, status: str, count: int) -> None:
    rows = [
        {"kind": "report", "payload": {}, "status": status, "priority": 0, "run_at": at,
         "attempts": 1, "created_at": at - timedelta(seconds=5), "updated_at": at,
         "finished_at": at}
        for _ in range(count)
    ]  # fmt: skip
    with engine.begin() as connection:
        connection.execute(insert(jobs), rows)


def busy_hour(engine: Engine, now: datetime) -> dict[str, int]:
    """A plausible hour: steady deliveries, a burst of failures at minute 40, jobs in waves.
    Returns the deliveries written by status."""
    written: dict[str, int] = {}
    for minute in range(0, 60, 2):
        at = now - timedelta(minutes=minute, seconds=10)
        failing = 30 <= minute <= 40
        for status, count in (("done", 20 + minute % 7), ("failed", 9 if failing else 0),
                              ("dead", 2 if minute == 36 else 0)):  # fmt: skip
            if count:
                add_deliveries(engine, at, status, count, tag=f"{minute}:")
                written[status] = written.get(status, 0) + count
        add_jobs(engine, at, "done", 5 + (minute // 10) * 3)
        if failing:
            add_jobs(engine, at, "dead", 1)
    return written
