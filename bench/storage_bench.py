"""Benchmark the 10,000-row import on PostgreSQL (not a test).

Modes, each on a fresh database, medians of ``--repeat`` runs, measured in the same run:
  e2e      upload to fake-gcs-server -> OBJECT_FINALIZE notification -> Pub/Sub emulator push
           subscription -> the service under gunicorn (2 workers) -> ``import-jobs``; timed from
           the upload call to ``processed_files.finished_at``.
  handler  the same notification through the dispatcher in this process (no Pub/Sub, no HTTP):
           download, checksum, parse, validate, enqueue, record.
  enqueue  the baseline: the same rows as ``NewJob``s through ``consumer.jobs.enqueue_many`` in
           batches of 500, and nothing else (the floor the jobs API sets).

    python bench/storage_bench.py [--rows 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.jobs import NewJob, enqueue_many
from consumer.settings import Settings
from consumer.storage.handler import StorageHandler
from consumer.storage.model import FINAL
from consumer.storage.reader import ObjectStore
from consumer.storage.store import ProcessedFiles
from tests.conftest import Server, settings_env
from tests.storage.conftest import Harness, email_csv
from triggers.local import stack

ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
PROJECT, TOPIC, BUCKET = "local", "gcs-notifications", "bench"
RULES = json.dumps([{"bucket": BUCKET, "processor": "import-jobs"}])


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


def bench_enqueue(rows: int) -> float:
    """Seconds to enqueue ``rows`` jobs, 500 per transaction."""
    lines = email_csv(rows).decode().splitlines()
    header = lines[0].split(",")
    jobs = [NewJob("email", dict(zip(header, line.split(","), strict=True)), key=f"k:{n}")
            for n, line in enumerate(lines[1:], 2)]  # fmt: skip
    with fresh_database() as url:
        engine = make_engine(url)
        started = time.perf_counter()
        for start in range(0, len(jobs), 500):
            with engine.begin() as connection:
                enqueue_many(connection, jobs[start : start + 500])
        seconds = time.perf_counter() - started
        engine.dispose()
    return seconds


def bench_handler(rows: int, gcs_url: str) -> float:
    with fresh_database() as url:
        settings = Settings(database_url=url, local_mode=True, storage_rules=RULES)
        engine = make_engine(url)
        handler = StorageHandler(ObjectStore(lambda: stack.storage_client(gcs_url)))
        harness = Harness(gcs_url, settings, engine, handler, BUCKET)
        name = f"handler-{uuid.uuid4().hex}.csv"
        generation = harness.upload(name, email_csv(rows))
        started = time.perf_counter()
        outcome = harness.notify(name, generation, content_type="text/csv")
        seconds = time.perf_counter() - started
        assert outcome.details.get("rows_accepted") == rows, outcome.details
        engine.dispose()
    return seconds


def bench_e2e(rows: int, pubsub_host: str, gcs_url: str) -> tuple[float, float]:
    """(upload -> finished seconds, the handler's own processing seconds)."""
    with fresh_database() as url, tempfile.TemporaryDirectory() as metrics:
        settings = Settings(database_url=url, local_mode=True)
        env = settings_env(settings, CONSUMER_STORAGE_RULES=RULES, STORAGE_EMULATOR_HOST=gcs_url,
                           PROMETHEUS_MULTIPROC_DIR=metrics)  # fmt: skip
        server = Server(env, workers=2)
        subscription = stack.ensure_push_subscription(
            pubsub_host, PROJECT, f"bench-{uuid.uuid4().hex[:8]}", TOPIC, f"{server.url}/push"
        )
        engine = make_engine(url)
        try:
            data, name = email_csv(rows), f"e2e-{uuid.uuid4().hex}.csv"
            started = datetime.now(UTC)
            blob = stack.storage_client(gcs_url).bucket(BUCKET).blob(name)
            blob.upload_from_string(data, content_type="text/csv")
            row = _wait(lambda: _finished(engine, name, int(blob.generation)))
            assert row.progress.rows_accepted == rows, row
            assert row.finished_at is not None
            return (row.finished_at - started).total_seconds(), row.progress.duration_ms / 1000
        finally:
            stack.subscriber(pubsub_host).delete_subscription(subscription=subscription)
            server.stop()
            engine.dispose()


def _finished(engine: object, name: str, generation: int) -> object:
    row = ProcessedFiles(engine).get(BUCKET, name, generation)  # type: ignore[arg-type]
    return row if row is not None and row.status in FINAL else None


def _wait(probe: Callable[[], object], timeout: float = 300) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.05)
    raise TimeoutError("the import did not finish")


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
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = args.rows
    with tempfile.TemporaryDirectory() as tmp, emulators(Path(tmp)) as (pubsub_host, gcs_url):
        enqueue = [bench_enqueue(rows) for _ in range(args.repeat)]
        handler = [bench_handler(rows, gcs_url) for _ in range(args.repeat)]
        e2e_runs = [bench_e2e(rows, pubsub_host, gcs_url) for _ in range(args.repeat)]
    e2e = [total for total, _ in e2e_runs]
    inside = [processing for _, processing in e2e_runs]
    base = rows / statistics.median(enqueue)
    print(f"{rows} rows, PostgreSQL, median of {args.repeat} runs")
    print(f"{'mode':<34}{'seconds':>9}{'rows/s':>10}{'vs enqueue':>12}")
    for label, runs in (
        ("enqueue_many only (baseline)", enqueue),
        ("handler in process", handler),
        ("e2e: upload -> jobs committed", e2e),
        ("  of which the handler, in gunicorn", inside),
    ):
        seconds = statistics.median(runs)
        rate = rows / seconds
        print(f"{label:<34}{seconds:>9.2f}{rate:>10.0f}{rate / base:>12.2f}")


if __name__ == "__main__":
    main()
