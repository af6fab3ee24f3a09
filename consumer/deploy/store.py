"""``WarmRuns``: one row per warmer run of one release, the ``warm_runs`` table's queries
(``consumer.deploy.queries``) run in the caller's transaction or in one of their own.

A row says what a release's warming did (targets ok, failed, not reached, p50/p95 latency,
duration) so an operator can see it after the push response is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.deploy import queries
from consumer.deploy.report import WarmReport
from consumer.wire.events import DeployEvent
from consumer.wire.text import storable

MAX_LISTED = 100
"""Failures and unreached targets kept per row; the counts are always complete."""
MAX_NAME = 200
"""The ``String(200)`` columns."""
MAX_KEY = 10_000


@dataclass(frozen=True)
class WarmRun:
    id: int
    key: str
    service: str
    release: str
    environment: str
    warmer: str
    attempt: int
    started_at: datetime
    duration_ms: float
    targets_ok: int
    targets_failed: int
    targets_not_reached: int
    p50_ms: float | None
    p95_ms: float | None
    failures: list[dict[str, Any]]
    not_reached: list[str]
    note: str | None

    @classmethod
    def from_row(cls, row: Any) -> WarmRun:
        return cls(**dict(row._mapping))


class WarmRuns(Store):
    """Named queries over ``warm_runs``."""

    def record(
        self,
        event: DeployEvent,
        attempt: int,
        started_at: datetime,
        report: WarmReport,
        *,
        connection: Connection | None = None,
    ) -> None:
        """Store one warmer's run of one release. Text is made storable and cut to its column,
        since an event built through the Python API was never checked by the classifier."""
        statement = queries.recorded({
            "key": storable(event.key, MAX_KEY), "service": storable(event.service, MAX_NAME),
            "release": storable(event.release, MAX_NAME),
            "environment": storable(event.environment, MAX_NAME),
            "warmer": storable(report.warmer, MAX_NAME), "attempt": attempt,
            "started_at": started_at, **_figures(report),
        })  # fmt: skip
        with self._write(connection) as conn:
            conn.execute(statement)

    def for_key(self, key: str, *, connection: Connection | None = None) -> Sequence[WarmRun]:
        """The runs of one release, oldest first."""
        return self._fetch(queries.for_key(key), connection)

    def recent(self, limit: int = 20, *, connection: Connection | None = None) -> Sequence[WarmRun]:
        """The latest runs, newest first."""
        return self._fetch(queries.recent(limit), connection)

    def _fetch(self, query: Any, connection: Connection | None) -> Sequence[WarmRun]:
        with self._read(connection) as conn:
            return [WarmRun.from_row(row) for row in conn.execute(query)]


def _figures(report: WarmReport) -> dict[str, Any]:
    failures = [
        {
            "target": storable(r.target),
            "status": r.status,
            "attempts": r.attempts,
            "error": storable(r.error, 500),
        }
        for r in report.failed[:MAX_LISTED]
    ]
    return {
        "duration_ms": report.duration_seconds * 1000,
        "targets_ok": report.ok,
        "targets_failed": len(report.failed),
        "targets_not_reached": len(report.not_reached),
        "p50_ms": report.latency_ms(0.50),
        "p95_ms": report.latency_ms(0.95),
        "failures": failures,
        "not_reached": [storable(target) for target in report.not_reached[:MAX_LISTED]],
        "note": storable(report.note) or None,
    }
