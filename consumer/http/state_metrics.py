"""The database's state as gauges, read when ``/metrics`` is scraped: is work stuck?

Jobs by kind and status and the age of the oldest due job, inbox rows by route and status, files
by status, and each tick task's last completed slot beside its period. Every pod reads the same
database, so these are the same on every pod: aggregate them with ``max``, never ``sum``.

A scrape must never load the database, however often it comes and however large the tables grow:
the answer is cached per process for ``CACHE_SECONDS`` (one scrape at a time refreshes it), each
count reads at most ``ROW_CAP`` rows (beyond that it is a lower bound), and on PostgreSQL the
queries run under a ``statement_timeout``. If they fail, the scrape still answers, with
``consumer_state_up 0`` and none of the gauges (a stale value would hide the outage).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Connection, Engine

from consumer.http import state_queries as queries
from consumer.jobs import flow as job_flow
from consumer.jobs import queries as job_queries
from consumer.pipeline.registry import Registry
from consumer.ticks import queries as tick_queries
from consumer.wire.schedule import interval_at
from consumer.wire.timeutil import Clock, utcnow

log = logging.getLogger("consumer.metrics")
CACHE_SECONDS = 15.0
ROW_CAP = 100_000
STATEMENT_TIMEOUT_MS = 2000
JOB_STATUSES = ("pending", "running", "dead")
"""Done and cancelled jobs are history (counted by ``consumer_job_results_total``)."""
INBOX_STATUSES = ("running", "failed", "dead", "unroutable")
"""The rows that need attention or are in flight; done and skipped ones are history."""


def jobs_by_kind_status(connection: Connection) -> list[tuple[str, str, int]]:
    """Jobs in ``JOB_STATUSES`` by kind and status, at most ``ROW_CAP`` read."""
    query = queries.jobs_by_kind_status(JOB_STATUSES, ROW_CAP)
    return [(str(g), str(s), int(n)) for g, s, n in connection.execute(query)]


def oldest_due_run_at(connection: Connection, now: datetime) -> datetime | None:
    """Since when the longest-waiting due job has been claimable: a pending job's ``run_at``,
    or the expired lease of a running one (its sweeper died)."""
    both = (job_queries.oldest_due(now), job_queries.oldest_expired_lease(now))
    found = [connection.execute(query).scalar_one_or_none() for query in both]
    due = [value for value in found if isinstance(value, datetime)]
    return min(due) if due else None


def inbox_by_route_status(connection: Connection) -> list[tuple[str, str, int]]:
    """Inbox rows in ``INBOX_STATUSES`` by route and status, at most ``ROW_CAP`` read."""
    query = queries.inbox_by_route_status(INBOX_STATUSES, ROW_CAP)
    return [(str(g), str(s), int(n)) for g, s, n in connection.execute(query)]


def files_by_status(connection: Connection) -> list[tuple[str, int]]:
    """Processed files by status, at most ``ROW_CAP`` read."""
    return [(str(s), int(n)) for s, n in connection.execute(queries.files_by_status(ROW_CAP))]


def tick_last_slots(connection: Connection) -> list[tuple[str, datetime]]:
    """Each tick task's latest completed slot (one row per task)."""
    return [(str(task), slot) for task, slot in connection.execute(tick_queries.LAST_SLOTS)]


GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "consumer_state_up": ("1 if the last state query succeeded", ()),
    "consumer_state_query_seconds": ("Time the last state query took", ()),
    "consumer_jobs": ("Jobs by kind and status (pending, running, dead)", ("kind", "status")),
    "consumer_job_concurrency": (
        "Running jobs with live leases, by kind: what a job kind's cap counts",
        ("kind",),
    ),
    "consumer_oldest_due_job_age_seconds": (
        "How long the longest-waiting due job has been claimable: past its run_at, or past the "
        "expired lease of a dead sweeper (0: none is due)",
        (),
    ),
    "consumer_inbox_rows": (
        "Inbox rows by route and status (running, failed, dead, unroutable)",
        ("route", "status"),
    ),
    "consumer_files": ("Processed files by status", ("status",)),
    "consumer_tick_last_slot_timestamp_seconds": (
        "Unix time of each tick task's latest completed schedule slot",
        ("task",),
    ),
    "consumer_tick_period_seconds": ("Each registered tick task's period", ("task",)),
    "consumer_task_paused": (
        "Unix time each paused tick task was paused (no series: the task is not paused)",
        ("task",),
    ),
}
"""Every gauge this collector exports: name -> (help, labels). The contract with k8s/monitoring."""


def gauge(name: str, rows: Iterable[tuple[object, ...]] = ()) -> Metric:
    """The family ``name`` with one sample per row: label values, then the value."""
    documentation, labels = GAUGES[name]
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    for row in rows:
        family.add_metric([str(value) for value in row[:-1]], float(row[-1]))  # type: ignore[arg-type]
    return family


class StateCollector(Collector):
    """A custom collector: reads the state at most once per ``cache_seconds`` per process."""

    def __init__(
        self,
        engine: Engine,
        periods: Callable[[], dict[str, float]],
        clock: Clock = utcnow,
        cache_seconds: float = CACHE_SECONDS,
    ) -> None:
        self.engine = engine
        self.periods = periods
        self.clock = clock
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._expires = float("-inf")
        self.reads = 0

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            if time.monotonic() >= self._expires:
                self._cached = list(self._read())
                self._expires = time.monotonic() + self.cache_seconds
            cached = list(self._cached)
        yield from cached

    def _read(self) -> Iterable[Metric]:
        self.reads += 1
        started = time.monotonic()
        try:
            families = self._query()
        except Exception as exc:
            log.warning("metrics: cannot read the state", extra={"reason": type(exc).__name__})
            return [gauge("consumer_state_up", [(0,)])]
        took = gauge("consumer_state_query_seconds", [(time.monotonic() - started,)])
        return [gauge("consumer_state_up", [(1,)]), took, *families]

    def _query(self) -> list[Metric]:
        now = self.clock()
        with self.engine.connect() as connection, connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(queries.statement_timeout(STATEMENT_TIMEOUT_MS))
            job_rows = jobs_by_kind_status(connection)
            oldest = oldest_due_run_at(connection, now)
            running = connection.execute(job_flow.concurrency_by_kind(now)).all()
            inbox_rows = inbox_by_route_status(connection)
            file_rows = files_by_status(connection)
            slots = tick_last_slots(connection)
            paused = [
                (row.task, row.paused_at) for row in connection.execute(tick_queries.ALL_PAUSED)
            ]
        age = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        return [
            gauge("consumer_jobs", job_rows),
            gauge("consumer_job_concurrency", [(str(k), int(n)) for k, n in running]),
            gauge("consumer_oldest_due_job_age_seconds", [(age,)]),
            gauge("consumer_inbox_rows", inbox_rows),
            gauge("consumer_files", file_rows),
            gauge("consumer_tick_last_slot_timestamp_seconds",
                  [(task, slot.timestamp()) for task, slot in slots]),
            gauge("consumer_tick_period_seconds", sorted(self.periods().items())),
            gauge("consumer_task_paused", [(task, at.timestamp()) for task, at in paused]),
        ]  # fmt: skip


def collector_for(engine: Engine, registry: Registry, clock: Clock = utcnow) -> StateCollector:
    """The app's collector: tick periods as the registry resolves them (overrides included)."""

    def periods() -> dict[str, float]:
        now = clock()
        return {task: interval_at(registry.schedule_of(task), now) for task in registry.tasks}

    return StateCollector(engine, periods, clock)
