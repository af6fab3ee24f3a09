"""The retention purge under a steady push load (``bench/growth_bench.py``): the cleanup task
itself purges the finished inbox rows past retention (on the partitioned inbox: drops the week
they fill) while an open-loop load pushes beside it. What it costs per row purged (WAL, the
database CPU of the purge's own connections) and what it does to the pushes' p99.

The p99 is compared over windows of one length: the pushes due over the seconds before the
purge, and over as many seconds from the purge's start (or the purge's whole span, if longer).
Over the purge's own span alone a purge of one second holds 200 pushes at 200/s, whose p99 is
their second-slowest: one stall of a quarter second set it, where the same stall in the window
before would have moved the p99 little. That span's p99 and its slowest push are printed too."""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.pool import Pool
from typing import NamedTuple

import psycopg

from bench.push_load import Sample, python_load, steady_load
from bench.push_serving import APPS, gunicorn, service_env, sqlalchemy_url
from bench.support.cpu import backends, children, cpu_seconds, spent
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs import cleanup as cleanup_task
from consumer.pipeline.context import HandlerContext
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every
from consumer.wire.timeutil import utcnow

WARM_SECONDS = 2.0
"""The steady load's first seconds, left out of its figures."""
TAIL_SECONDS = 2.0
"""The steady load goes on this long after the purge, then stops."""
PURGER = "bench-purge"
"""The ``application_name`` of the purge's connections: their backends' CPU is the purge's."""


class Before(NamedTuple):
    """The steady load alone, before the purge: cores of the workers and the database, and the
    WAL it writes a second (subtracted from the WAL written during the purge)."""

    app_cores: float
    db_cores: float
    wal_per_second: float


class Purge(NamedTuple):
    began: float
    ended: float
    rows: int
    runs: int
    finished: bool
    """Whether the last run of the task found no more rows past retention."""
    wal_bytes: int
    """WAL written while it ran (the pushes' beside it included)."""
    db_cpu: float
    """CPU seconds of the purge's own backends."""
    dropped: list[str]
    """The inbox partitions the runs dropped."""
    carried: int
    """Rows they carried out of those partitions first."""


class PurgeRun(NamedTuple):
    samples: list[Sample]
    purge: Purge
    before: Before

    def during(self) -> tuple[list[Sample], list[Sample], list[Sample]]:
        """The pushes due before the purge (after the warm-up), in a window as long from the
        purge's start (at least the purge's span), and in the purge's span."""
        began, ended = self.purge.began, self.purge.ended
        window_end = began + max(ended - began, began - WARM_SECONDS)
        before = [s for s in self.samples if WARM_SECONDS <= s.scheduled < began]
        window = [s for s in self.samples if began <= s.scheduled < window_end]
        span = [s for s in self.samples if began <= s.scheduled < ended]
        return before, window, span

    def p99_ratio(self) -> float:
        """The window's p99 over the one before."""
        before, window, _ = self.during()
        return p99(window) / p99(before)

    def span_p99_ratio(self) -> float:
        """The purge's own span's p99 over the window before's."""
        before, _, span = self.during()
        return p99(span) / p99(before)

    def wal_per_row(self) -> float:
        """The purge's WAL: the server's meanwhile less what the pushes wrote at their rate."""
        seconds = self.purge.ended - self.purge.began
        pushes = self.before.wal_per_second * seconds
        return (self.purge.wal_bytes - pushes) / max(self.purge.rows, 1)

    def db_us_per_row(self) -> float:
        return self.purge.db_cpu * 1e6 / max(self.purge.rows, 1)


def purge_under_load(conninfo: str, args: argparse.Namespace) -> PurgeRun:
    """The steady load, what it used before the purge, and the purge started ``--steady``
    seconds into it."""
    env = service_env(conninfo, "on")
    with gunicorn(APPS["consumer"], env, "sync") as (url, pid), purger(args) as pool:
        python_load(url, args.connections, 2.0, "purge-warm")
        total = args.steady + max(args.purge_seconds, args.steady) + 2 * TAIL_SECONDS
        stop = threading.Event()
        samples: list[Sample] = []
        load = threading.Thread(
            target=lambda: samples.extend(steady_load(url, args.rate, total, "steady", stop=stop))
        )
        started = time.monotonic()
        load.start()
        time.sleep(WARM_SECONDS)
        before = used_before(pid, conninfo, args.steady - WARM_SECONDS)
        deadline = started + args.steady + args.purge_seconds
        purge = pool.apply(purge_runs, (conninfo, started, deadline))
        window_end = purge.began + (args.steady - WARM_SECONDS)  # the window after, as long
        time.sleep(max(TAIL_SECONDS, window_end - (time.monotonic() - started) + TAIL_SECONDS))
        stop.set()
        load.join()
    return PurgeRun(samples, purge, before)


@contextmanager
def purger(args: argparse.Namespace) -> Iterator[Pool]:
    """A process of its own for the cleanup task, started before the load: in the load's process
    its Python would hold the GIL from the load's threads, and their delays count as the pushes'
    latency (a short purge's window holds few pushes, each of them delayed so)."""
    context = multiprocessing.get_context("spawn")
    set_up = (args.chunk_rows, args.pause_ratio)
    with context.Pool(1, initializer=_set_up_purger, initargs=set_up) as pool:
        pool.apply(time.monotonic)  # started, its imports done
        yield pool


def _set_up_purger(chunk_rows: int, pause_ratio: float) -> None:
    """The task's own constants, as the bench's options set them (``growth_bench.main``)."""
    cleanup_task.CHUNK_ROWS, cleanup_task.PAUSE_RATIO = chunk_rows, pause_ratio


def used_before(pid: int, conninfo: str, seconds: float) -> Before:
    """Cores the gunicorn workers of ``pid`` and the database's backends used over ``seconds``,
    and the WAL written a second meanwhile."""
    app, db = cpu_seconds(children(pid)), cpu_seconds(backends(conninfo))
    wal = wal_position(conninfo)
    time.sleep(seconds)
    app_spent = spent(app, cpu_seconds(children(pid)))
    db_spent = spent(db, cpu_seconds(backends(conninfo)))
    wal_spent = wal_position(conninfo) - wal
    return Before(app_spent / seconds, db_spent / seconds, wal_spent / seconds)


def purge_runs(conninfo: str, started: float, deadline: float) -> Purge:
    """The cleanup task itself, run after run (as its continuations would) until a run finds no
    more rows past retention or ``deadline`` comes."""
    url = f"{sqlalchemy_url(conninfo)}?application_name={PURGER}"
    settings = Settings(database_url=url, local_mode=True)
    engine = make_engine(settings.database_url)
    message = PushMessage("growth-bench", utcnow(), attributes={"task": "cleanup"})
    event = TickEvent("cleanup", utcnow(), Every(cleanup_task.DAY), message)
    began, rows, runs, more, wal_before = time.monotonic(), 0, 0, True, wal_position(conninfo)
    dropped: list[str] = []
    carried = 0
    try:
        while more and (now := time.monotonic()) < deadline:
            budget = min(settings.handler_budget_seconds, deadline - now)
            context = HandlerContext(settings, engine, "tick:cleanup", 1, now + budget)
            done = cleanup_task.cleanup(context, event)
            rows, runs, more = rows + done["inbox_purged"], runs + 1, bool(done["more"])
            dropped += done.get("inbox_partitions_dropped", [])
            carried += done.get("inbox_rows_carried", 0)
        ended = time.monotonic() - started
        wal = wal_position(conninfo) - wal_before
        db_cpu = spent({}, cpu_seconds(backends(conninfo, PURGER)))  # its pooled connections
    finally:
        engine.dispose()
    return Purge(began - started, ended, rows, runs, not more, wal, db_cpu, dropped, carried)


def wal_position(conninfo: str) -> int:
    """The server's WAL position, in bytes from its start."""
    with psycopg.connect(conninfo) as connection:
        row = connection.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def report_purge(run: PurgeRun, args: argparse.Namespace) -> None:
    purge = run.purge
    seconds = purge.ended - purge.began
    rate = purge.rows / max(seconds, 1e-9)
    print(f"\npurge under a steady {args.rate:g} pushes/s (open loop, latency from the due time): "
          f"{purge.rows:,} rows in {seconds:.1f} s ({rate:,.0f} rows/s), "
          f"{purge.runs} run(s) of the cleanup task{'' if purge.finished else ' (unfinished)'}, "
          f"partitions dropped: {', '.join(purge.dropped) or 'none'} ({purge.carried} rows "
          f"carried out first); {purge.wal_bytes / 1e6:,.1f} MB of WAL meanwhile "
          f"(the server's)")  # fmt: skip
    names = ("before", "from the purge's start, as long", "the purge's span")
    for name, part in zip(names, run.during(), strict=True):
        failed = sum(not s.ok for s in part)
        slowest = max((s.latency * 1000 for s in part), default=float("nan"))
        print(f"  {name:<33} {len(part):6} pushes  p50 {quantile(part, 50):7.2f} ms  "
              f"p99 {p99(part):7.2f} ms  slowest {slowest:7.2f} ms  failed {failed}")  # fmt: skip
    print(f"  ratio p99 during/before {run.p99_ratio():.2f}x (target <= 1.2); over the purge's "
          f"span alone {run.span_p99_ratio():.2f}x")  # fmt: skip
    cores = run.before
    app, db = (used / args.rate * 1000 for used in (cores.app_cores, cores.db_cores))
    print(f"  before the purge: gunicorn workers {cores.app_cores:.2f} cores ({app:.2f} ms "
          f"per push), database {cores.db_cores:.2f} cores ({db:.2f} ms per push)")  # fmt: skip
    print(f"  the purge: {run.wal_per_row():.0f} bytes of WAL and {run.db_us_per_row():.1f} us of "
          f"its backends' CPU per row")  # fmt: skip


def purge_line(runs: list[PurgeRun], rate: float) -> str:
    """The last line: medians of the runs."""
    wal = statistics.median(run.wal_per_row() for run in runs)
    cpu = statistics.median(run.db_us_per_row() for run in runs)
    ratio = statistics.median(run.p99_ratio() for run in runs)
    return (f"purge: {wal:.0f} bytes WAL/row, {cpu:.1f} us db cpu/row; "
            f"push p99 during purge {ratio:.2f} x (at {rate:g}/s)")  # fmt: skip


def p99(samples: list[Sample]) -> float:
    return quantile(samples, 99)


def quantile(samples: list[Sample], percent: int) -> float:
    if len(samples) < 2:
        return float("nan")
    return statistics.quantiles((s.latency * 1000 for s in samples), n=100)[percent - 1]
