"""Benchmark a CSV import on PostgreSQL against the COPY floor (not a test).

Modes, each on a fresh migrated database, medians of ``--repeat`` runs, measured in the same run:
  floor    direct psycopg, no service: the same rows (keys of the import's form, payload JSON)
           prepared beforehand, ``COPY``-ed into a temporary stage, then one ``INSERT ... SELECT
           ... ON CONFLICT DO NOTHING`` into the migrated ``jobs`` table, one transaction.
  handler  the OBJECT_FINALIZE notification through the dispatcher in this process (no Pub/Sub,
           no HTTP): download, checksum, parse, validate, enqueue, record.
  e2e      upload to fake-gcs-server -> OBJECT_FINALIZE notification -> Pub/Sub emulator push
           subscription -> the service under gunicorn (2 workers) -> ``import-jobs``; timed from
           the upload call to ``processed_files.finished_at``.
The headline is e2e beside the floor, and their ratio. CPU per row is read from ``/proc`` (user
plus system time), steadier than rates on a shared machine; each side counts the processes that
did its rows' work, from its clock's start to its end:
  floor    this process (``process_time``: all its threads, only the timed part; preparing the
           rows comes before) and its one backend.
  e2e      the gunicorn worker that imported the file (the one that spent the most CPU; all its
           threads: the push, the download and checksum, reading, validating, the writer thread,
           the lease heartbeat) and the backends connected to that worker (matched by their
           client's TCP port, read when the file is done: the import's connections and that
           worker's idle ones), from before the upload (both workers booted) until the poller sees
           the file finished.
           Not counted: the other worker, every other backend (the other worker's, a NOTIFY
           listener's), the bench's own polling connection, the emulators; the line before the
           last prints each side's parts, and what e2e left out. A backend that connected and
           closed within the run is missed (the pool keeps the import's connections).
The last line sets both beside each other (``import: ...``), medians of the runs.

    python -m bench.storage_bench [--rows 100000] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Engine

from bench.support.cpu import backends, cpu_seconds, spent
from bench.support.import_cpu import E2E, Floor, booted, cpu_line, e2e_of, import_line
from bench.support.serving import Server, settings_env
from bench.support.storage import Harness, email_csv
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.storage.handler import StorageHandler
from consumer.storage.model import FINAL, FileRow
from consumer.storage.reader import ObjectStore
from consumer.storage.store import ProcessedFiles
from triggers.local import stack

T = TypeVar("T")
ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
PROJECT, TOPIC, BUCKET = "local", "gcs-notifications", "bench"
RULES = json.dumps([{"bucket": BUCKET, "processor": "import-jobs"}])
APP = "consumer.http.wsgi:app()"


@contextmanager
def fresh_database() -> Iterator[str]:
    name = f"storage_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    upgrade(url)
    try:
        yield url
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


FLOOR_STATEMENTS = (
    "CREATE TEMPORARY TABLE jobs_stage (idempotency_key text, payload text) ON COMMIT DROP",
    "COPY jobs_stage (idempotency_key, payload) FROM STDIN",
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts, "
    "idempotency_key, created_at, updated_at) SELECT 'email', payload::json, 'pending', 0, "
    "now(), 0, NULL, idempotency_key, now(), now() FROM jobs_stage ON CONFLICT DO NOTHING",
)


def bench_floor(rows: int) -> Floor:
    """The set-based floor: COPY into a stage, one INSERT ... SELECT, commit."""
    lines = email_csv(rows).decode().splitlines()
    header = lines[0].split(",")
    # The keys the import makes, ``bucket/object#generation:line``: their length is part of
    # what the unique index costs (short made-up keys made the floor about 12% faster).
    prefix = f"{BUCKET}/handler-{uuid.uuid4().hex}.csv#{time.time_ns() // 1000}:"
    staged = [(f"{prefix}{n}", json.dumps(dict(zip(header, line.split(","), strict=True))))
              for n, line in enumerate(lines[1:], 2)]  # fmt: skip
    create, copy_in, move = FLOOR_STATEMENTS
    with fresh_database() as url:
        dsn = url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn) as connection:
            backend = [connection.info.backend_pid]
            db_cpu, cpu = cpu_seconds(backend), time.process_time()
            started = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute(create)
                with cursor.copy(copy_in) as copy:
                    for row in staged:
                        copy.write_row(row)
                cursor.execute(move)
                assert cursor.rowcount == rows, cursor.rowcount
            connection.commit()
            seconds = time.perf_counter() - started
            cpu, db = time.process_time() - cpu, spent(db_cpu, cpu_seconds(backend))
    return Floor(seconds, cpu, db)


def bench_handler(rows: int, gcs_url: str, profiler: Any = None) -> float:
    """Seconds of one notification through the dispatcher in this process (under
    ``profiler``, a ``cProfile.Profile``, when given)."""
    with fresh_database() as url:
        settings = Settings.of(database_url=url, local_mode=True, storage_rules=RULES)
        engine = make_engine(url)
        handler = StorageHandler(ObjectStore(lambda: stack.storage_client(gcs_url)))
        harness = Harness(gcs_url, settings, engine, handler, BUCKET)
        name = f"handler-{uuid.uuid4().hex}.csv"
        generation = harness.upload(name, email_csv(rows))
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        outcome = harness.notify(name, generation, content_type="text/csv")
        seconds = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
        assert outcome.details.get("rows_accepted") == rows, outcome.details
        engine.dispose()
    return seconds


WORKERS = 2
POLLER = "storage-bench-poll"
"""The ``application_name`` of the bench's own polling connection, left out of e2e's CPU."""


def bench_e2e(rows: int, pubsub_host: str, gcs_url: str, app: str = APP, **env_extra: str) -> E2E:
    """One file through the emulators and the service under gunicorn, timed and its CPU read."""
    with fresh_database() as url, tempfile.TemporaryDirectory() as metrics:
        settings = Settings(database_url=url, local_mode=True)
        env = settings_env(settings, CONSUMER_STORAGE_RULES=RULES, STORAGE_EMULATOR_HOST=gcs_url,
                           PROMETHEUS_MULTIPROC_DIR=metrics, **env_extra)  # fmt: skip
        server = Server(env, workers=WORKERS, app=app)
        subscription = stack.ensure_push_subscription(
            pubsub_host, PROJECT, f"bench-{uuid.uuid4().hex[:8]}", TOPIC, f"{server.url}/push"
        )
        engine = make_engine(f"{url}?application_name={POLLER}")
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        try:
            data, name = email_csv(rows), f"e2e-{uuid.uuid4().hex}.csv"
            workers = booted(server.process.pid, WORKERS)
            before = cpu_seconds(workers), cpu_seconds(backends(conninfo, but=POLLER))
            started = datetime.now(UTC)
            blob = stack.storage_client(gcs_url).bucket(BUCKET).blob(name)
            blob.upload_from_string(data, content_type="text/csv")
            row = _wait(lambda: _finished(engine, name, int(blob.generation)))
            after = cpu_seconds(workers), cpu_seconds(backends(conninfo, but=POLLER))
            assert row.progress.rows_accepted == rows, row
            assert row.finished_at is not None
            return e2e_of(row, started, conninfo, before, after)
        finally:
            stack.subscriber(pubsub_host).delete_subscription(subscription=subscription)
            server.stop()
            engine.dispose()


def _finished(engine: Engine, name: str, generation: int) -> FileRow | None:
    row = ProcessedFiles(engine).get(BUCKET, name, generation)
    return row if row is not None and row.status in FINAL else None


def _wait(probe: Callable[[], T | None], timeout: float = 300) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.05)
    raise TimeoutError("the import did not finish")


def profile(rows: int, pubsub_host: str, gcs_url: str) -> None:
    """One import in process and one through gunicorn, each under cProfile (the request's
    thread), printed side by side: where the gunicorn worker's extra time goes."""
    import cProfile
    import pstats

    sort = os.environ.get("PROFILE_SORT", "tottime")
    profiler = cProfile.Profile()
    seconds = bench_handler(rows, gcs_url, profiler)
    print(f"== in process: {seconds:.2f} s")
    pstats.Stats(profiler).sort_stats(sort).print_stats(25)
    with tempfile.TemporaryDirectory() as directory:
        run = bench_e2e(
            rows, pubsub_host, gcs_url, "bench.profiled_app:app()", BENCH_PROFILE_DIR=directory
        )
        print(f"== gunicorn: upload -> finished {run.seconds:.2f} s, handler {run.handler:.2f} s")
        dumps = sorted(Path(directory).glob("*.prof"), key=lambda path: path.stat().st_size)
        if not dumps:
            raise SystemExit("the gunicorn workers wrote no profile (bench/profiled_app.py)")
        pstats.Stats(str(dumps[-1])).sort_stats(sort).print_stats(25)


@contextmanager
def emulators(root: Path) -> Iterator[tuple[str, str]]:
    if reason := stack.missing():
        raise SystemExit(f"cannot run the e2e mode: {reason}")
    pubsub_port, gcs_port = stack.free_port(), stack.free_port()
    pubsub = stack.start_pubsub(pubsub_port, root / "pubsub.log", PROJECT)
    host = f"127.0.0.1:{pubsub_port}"
    try:
        stack.ensure_topic(host, PROJECT, TOPIC)
        gcs = stack.start_fake_gcs(gcs_port, root / "gcs", root / "gcs.log", host, PROJECT, TOPIC)
        try:
            stack.ensure_bucket(f"http://127.0.0.1:{gcs_port}", BUCKET)
            yield host, f"http://127.0.0.1:{gcs_port}"
        finally:
            gcs.stop()
    finally:
        pubsub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile both paths instead")
    args = parser.parse_args()
    rows = args.rows
    with tempfile.TemporaryDirectory() as tmp, emulators(Path(tmp)) as (pubsub_host, gcs_url):
        if args.profile:
            return profile(rows, pubsub_host, gcs_url)
        floor, handler, e2e_runs = [], [], []
        for _ in range(args.repeat):  # interleaved, so load on the machine hits every mode
            floor.append(bench_floor(rows))
            handler.append(bench_handler(rows, gcs_url))
            e2e_runs.append(bench_e2e(rows, pubsub_host, gcs_url))
    e2e = [run.seconds for run in e2e_runs]
    inside = [run.handler for run in e2e_runs]
    base = rows / statistics.median(run.seconds for run in floor)
    print(f"{rows} rows, PostgreSQL, median of {args.repeat} runs")
    print(f"{'mode':<38}{'seconds':>9}{'rows/s':>10}{'vs floor':>10}")
    for label, runs in (
        ("floor: COPY stage + INSERT ... SELECT", [run.seconds for run in floor]),
        ("handler in process", handler),
        ("e2e: upload -> jobs committed", e2e),
        ("  of which the handler, in gunicorn", inside),
    ):
        seconds = statistics.median(runs)
        rate = rows / seconds
        print(f"{label:<38}{seconds:>9.2f}{rate:>10.0f}{rate / base:>10.2f}")
    print(cpu_line(rows, floor, e2e_runs))
    print(import_line(rows, floor, e2e_runs))


if __name__ == "__main__":
    main()
