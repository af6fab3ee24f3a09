"""The sweep bench's workers (``bench/sweep_bench.py``), each run in its own spawned process: it
waits at the barrier, drains the queue, and puts its finish time, claim latencies, jobs done
and CPU seconds on the results queue; and what fills the queue for each before a run."""

from __future__ import annotations

import cProfile
import logging
import os
import pstats
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import procrastinate
import psycopg
from sqlalchemy import Engine
from sqlalchemy.dialects.postgresql import psycopg as dialect

from consumer import NewJob, enqueue_many
from consumer.config.flow import JobLimit
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.prepared import prepared
from consumer.jobs import queries
from consumer.jobs.flow_store import FlowStore
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds

LEASE = timedelta(seconds=300)
TEXT_PAYLOAD = "CAST(jobs.payload AS TEXT) AS payload"
"""How the sweep's claim returns the payload (``consumer.jobs.queries.claimed``)."""


def rendered(statement: Any) -> tuple[str, dict[str, Any]]:
    """A statement of consumer.jobs.queries exactly as SQLAlchemy sends it to psycopg, with the
    constants it binds."""
    compiled = statement.compile(dialect=dialect.dialect())
    return compiled.string, dict(compiled.params)


def sqlalchemy_url(conninfo: str) -> str:
    return conninfo.replace("postgresql://", "postgresql+psycopg://")


def consumer_worker(
    conninfo: str,
    batch: int,
    barrier: Any,
    results: Any,
    cap: int | None = None,
    group_cap: int | None = None,
) -> None:

    url = sqlalchemy_url(conninfo)
    settings = Settings.of(database_url=url, local_mode=True, sweep_batch_size=batch)
    engine = make_engine(url, pool_size=1)
    kinds = JobKinds()
    kinds.add("noop", lambda context, job: None)
    latencies: list[float] = []
    JobStore.claim = timed(JobStore.claim, latencies)  # type: ignore[method-assign]
    JobStore.claim_then = timed(JobStore.claim_then, latencies)  # type: ignore[method-assign]
    compile_sweep(engine)
    barrier.wait()
    cpu = time.process_time()
    limits = {} if cap is None else {"noop": JobLimit(cap=cap)}
    if group_cap is not None:
        limits = {"noop": JobLimit(group_cap=group_cap)}
    summary = Sweeper(settings, engine, kinds, limits=limits).run(time.monotonic() + 600)
    results.put((time.monotonic(), latencies, summary.done, time.process_time() - cpu))


def compile_sweep(engine: Engine) -> None:
    """Before the clock, as the direct worker renders its statements before it: the sweep's
    statements compiled (the claim and the done write, prepared; the overrides and due counts
    read, read-only, which caches their compiled forms) and the connection opened."""
    for build in (queries.claim, queries.done):
        prepared(build, engine.dialect)
    with engine.connect() as connection:
        FlowStore(engine).overrides(connection)
        JobStore(engine).due_by_kind(datetime.now(UTC), connection=connection)


def timed(function: Callable[..., Any], latencies: list[float]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            latencies.append(time.perf_counter() - started)

    return wrapper


def direct_worker(conninfo: str, batch: int, barrier: Any, results: Any) -> None:
    """The sweep's statements and transactions (record the last batch and claim the next in
    one), through psycopg alone."""
    claim_sql, claim_constants = rendered(queries.claim("postgresql"))
    # The payload column as a plain psycopg user reads it: decoded by the driver's JSON loader
    # (``json.loads``, row by row); the sweep's claim casts it to text and decodes a claim's
    # payloads in one call (``consumer.jobs.model.claimed_jobs``).
    if TEXT_PAYLOAD not in claim_sql:
        raise SystemExit("the claim's payload column changed: update bench/sweep_workers.py")
    claim_sql = claim_sql.replace(TEXT_PAYLOAD, "jobs.payload")
    done_sql, done_constants = rendered(queries.done("postgresql"))
    claim_params: dict[str, Any] = {**claim_constants, "kinds": ["noop"]}
    latencies: list[float] = []
    finished: list[int] = []
    done, token = 0, ""

    def record(ids: list[int]) -> int:
        params = {**done_constants, "now": datetime.now(UTC), "token": token, "ids": ids}
        return connection.execute(done_sql, params).rowcount

    with psycopg.connect(conninfo) as connection:
        connection.execute("SELECT 1")
        connection.commit()
        barrier.wait()
        cpu = time.process_time()
        while True:
            if finished:
                done += record(finished)
            token = f"direct/{os.getpid()}/{uuid.uuid4().hex[:16]}"
            now = datetime.now(UTC)
            params = {**claim_params, "now": now, "limit": batch, "lease": now + LEASE}
            started = time.perf_counter()
            rows = connection.execute(claim_sql, {**params, "token": token}).fetchall()
            latencies.append(time.perf_counter() - started)
            connection.commit()
            finished = [row[0] for row in rows]  # the no-op "runs"
            if len(rows) < batch:
                if finished:
                    done += record(finished)
                    connection.commit()
                break
    results.put((time.monotonic(), latencies, done, time.process_time() - cpu))


def procrastinate_app(conninfo: str, sync: bool = False) -> Any:

    # Quiet: its warnings about the app's set-up are not the bench's figures.
    logging.getLogger("procrastinate").setLevel(logging.ERROR)

    connector = (
        procrastinate.SyncPsycopgConnector(conninfo=conninfo)
        if sync
        else procrastinate.PsycopgConnector(conninfo=conninfo)
    )
    app = procrastinate.App(connector=connector)
    app.task(name="noop")(noop)
    return app


def noop() -> None:
    """The no-op job."""


def procrastinate_worker(conninfo: str, batch: int, barrier: Any, results: Any) -> None:
    app = procrastinate_app(conninfo)
    barrier.wait()
    cpu = time.process_time()
    app.run_worker(
        wait=False, concurrency=1, install_signal_handlers=False, listen_notify=False,
        delete_jobs="never",
    )  # fmt: skip
    results.put((time.monotonic(), [], 0, time.process_time() - cpu))


def fill_jobs(conninfo: str, count: int, groups: int = 0) -> None:
    """``count`` no-op jobs; with ``groups``, spread over that many groups, round-robin."""
    engine = make_engine(sqlalchemy_url(conninfo))
    with engine.begin() as connection:
        connection.exec_driver_sql("TRUNCATE jobs")
        new_jobs = [
            NewJob("noop", {"i": i}, group=f"g{i % groups}" if groups else None)
            for i in range(count)
        ]
        enqueue_many(connection, new_jobs, allow_unknown=True)
    engine.dispose()
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE jobs")


def fill_procrastinate(conninfo: str, count: int) -> None:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("TRUNCATE procrastinate_jobs CASCADE")
    app = procrastinate_app(conninfo, sync=True)
    with app.open():
        task = app.tasks["noop"]
        for start in range(0, count, 1000):
            task.batch_defer(*[{} for _ in range(min(1000, count - start))])
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE procrastinate_jobs")


def setup_procrastinate(conninfo: str) -> None:
    app = procrastinate_app(conninfo, sync=True)
    with app.open():
        app.schema_manager.apply_schema()


def profile_consumer(conninfo: str, jobs: int, batch: int) -> None:
    """One in-process sweep under cProfile, timed by the process's CPU clock: where does the CPU
    go (waits on the database, which both modes share, are left out)?"""
    fill_jobs(conninfo, jobs)
    url = sqlalchemy_url(conninfo)
    engine = make_engine(url, pool_size=1)
    kinds = JobKinds()
    kinds.add("noop", lambda context, job: None)
    settings = Settings.of(database_url=url, local_mode=True, sweep_batch_size=batch)
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(Sweeper(settings, engine, kinds).run, time.monotonic() + 600)
    stats = pstats.Stats(profiler, stream=sys.stdout)
    print(f"\nprofile: one sweeper, {jobs} no-op jobs, batch {batch} (top by own CPU time)")
    stats.sort_stats("tottime").print_stats(15)
    stats.sort_stats("cumulative").print_stats(r"consumer/|sqlalchemy/engine/base|cursor\.py", 25)
    engine.dispose()
