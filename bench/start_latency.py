"""Start latency: from an enqueue's commit to its job's handler starting (not a test).

Three consumer pods (gunicorn servers, ``--workers`` each) behind a round-robin balancer, the
Pub/Sub emulator pushing the wake-ups topic to the balancer. Jobs are enqueued one at a time at
``--rate`` per second (``--jobs`` of them, at most ``--max-seconds``); each enqueue's commit
publishes a wake-up (``consumer.jobs.wake``) whose push makes one pod sweep now. The handler
stamps when it starts. The emulator's own publish-to-push latency to a bare endpoint, measured
in the same run, is the wake-up's floor. On PostgreSQL the same commit also NOTIFYs the pods'
listeners (``consumer.jobs.notify``), so this figure is the sooner of the two, usually the
NOTIFY's. Without either a job waits for the ``sweep`` tick: P/2 on average, P at worst.

Then the LISTEN/NOTIFY path, on fresh pods and database: each job is enqueued with the SQL
function ``consumer_enqueue`` in a transaction of its own; its commit NOTIFYs, and every pod's
listener (``consumer.jobs.listen``) sweeps in-process. The same pods then take jobs enqueued by
Python's ``enqueue`` (no wake-up topic: its NOTIFY alone starts them) and through the job API
(``POST /jobs`` to one pod, timed from its answer). No emulator is involved: without one, only
these figures are printed.

    python -m bench.start_latency [--jobs 200] [--rate 10] [--pods 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import psycopg
import requests
from sqlalchemy import Column, Engine, Float, Integer, MetaData, Table, insert, select, text

from bench.support.postgres import migrated_postgres_database
from bench.support.serving import free_port, wait_ready
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.demo.balancer import Balancer
from consumer.jobs import wake
from consumer.jobs.store import enqueue
from consumer.jobs.tick import SWEEP_PERIOD_SECONDS
from triggers.local import stack

ROOT = Path(__file__).resolve().parent.parent
ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
PROJECT = "latency"
KIND = "stamp"
metadata = MetaData()
starts = Table("bench_starts", metadata, Column("job_id", Integer, primary_key=True),
               Column("started", Float, nullable=False))  # fmt: skip


def register(registry: Any) -> None:
    """Plugin hook (CONSUMER_PLUGINS=bench.start_latency): a kind that stamps its start."""

    def stamp(context: Any, job: Any) -> None:
        started = time.time()
        with context.engine.begin() as connection:
            connection.execute(insert(starts).values(job_id=job.id, started=started))

    registry.job_kinds.add(KIND, stamp)


@contextlib.contextmanager
def pods(count: int, workers: int, env: dict[str, str]) -> Iterator[list[int]]:
    """``count`` gunicorn servers on free ports, stopped by PID at the end."""
    ports, processes = [free_port() for _ in range(count)], []
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    inherited["PYTHONPATH"] = str(ROOT)
    try:
        for port in ports:
            command = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
                       "--workers", str(workers), "--timeout", "60", "--no-control-socket",
                       "consumer.http.wsgi:app()"]  # fmt: skip
            processes.append(subprocess.Popen(command, env={**inherited, **env}, cwd=ROOT,
                                              stderr=subprocess.DEVNULL))  # fmt: skip
        for port, process in zip(ports, processes, strict=True):
            wait_ready(f"http://127.0.0.1:{port}/healthz", process)
        yield ports
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def floor_ms(pubsub: str, samples: int = 30) -> float:
    """Median publish-to-push latency of the emulator to an endpoint that only records."""
    arrivals: dict[str, float] = {}

    class Bare(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            arrivals[body["message"]["attributes"]["n"]] = time.time()
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Bare)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        stack.ensure_topic(pubsub, PROJECT, "floor")
        endpoint = f"http://127.0.0.1:{server.server_port}/push"
        stack.ensure_push_subscription(pubsub, PROJECT, "floor-push", "floor", endpoint, 10)
        client, sent = stack.publisher(pubsub), {}
        for n in range(samples):
            sent[str(n)] = time.time()
            client.publish(f"projects/{PROJECT}/topics/floor", b"", n=str(n)).result()
            time.sleep(0.05)
        deadline = time.monotonic() + 20
        while len(arrivals) < samples and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.shutdown()
        server.server_close()
    return percentile([(arrivals[n] - sent[n]) * 1000 for n in arrivals], 0.5)


def enqueue_steadily(
    engine: Engine, jobs: int, rate: float, max_seconds: float
) -> dict[int, float]:
    """Job id -> when its enqueue returned (committed), one job every ``1/rate`` seconds."""
    committed: dict[int, float] = {}
    started = time.monotonic()
    for n in range(jobs):
        if time.monotonic() - started > max_seconds:
            break
        result = enqueue(engine, KIND, {}, kinds=[KIND])
        committed[int(result.job_id or 0)] = time.time()
        time.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
    return committed


def latencies(engine: Engine, committed: dict[int, float], wait: float) -> list[float]:
    """Milliseconds from commit to start of every job that started within ``wait`` seconds."""
    deadline, found = time.monotonic() + wait, {}
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            found = dict(connection.execute(select(starts.c.job_id, starts.c.started)).all())
        if len(found) >= len(committed):
            break
        time.sleep(0.2)
    return [(found[i] - at) * 1000 for i, at in committed.items() if i in found]


def measure(pubsub: str, database_url: str, args: argparse.Namespace) -> list[float]:
    """Start the pods and the balancer, push wake-ups to it, enqueue, and time the starts."""
    topic = stack.ensure_topic(pubsub, PROJECT, "wakeups")
    env = {"CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_LOG_LEVEL": "WARNING", "CONSUMER_PLUGINS": "bench.start_latency",
           "CONSUMER_WAKE_TOPIC": topic, "PUBSUB_EMULATOR_HOST": pubsub}  # fmt: skip
    engine = make_engine(database_url)
    metadata.create_all(engine)
    with pods(args.pods, args.workers, env) as ports, Balancer(ports) as balancer:
        stack.ensure_push_subscription(pubsub, PROJECT, "wakeups-push", "wakeups",
                                       balancer.url, 60)  # fmt: skip
        # This process publishes its wake-ups too.
        with mock.patch.dict(os.environ, PUBSUB_EMULATOR_HOST=pubsub):
            wake.attach(engine, Settings.of(local_mode=True, wake_topic=topic))
            committed = enqueue_steadily(engine, args.jobs, args.rate, args.max_seconds)
            found = latencies(engine, committed, 30)
    engine.dispose()
    return found


def enqueue_in_sql(
    database_url: str, jobs: int, rate: float, max_seconds: float
) -> dict[int, float]:
    """Job id -> when the transaction that called ``consumer_enqueue`` committed."""
    committed: dict[int, float] = {}
    started = time.monotonic()
    dsn = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as connection:
        for n in range(jobs):
            if time.monotonic() - started > max_seconds:
                break
            row = connection.execute("SELECT consumer_enqueue(%s)", [KIND]).fetchone()
            connection.commit()
            committed[int(row[0]) if row else 0] = time.time()
            time.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
    return committed


def wait_listening(engine: Engine, count: int, timeout: float = 60) -> None:
    """Until ``count`` serving processes LISTEN on the bench's database."""
    query = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND query = 'LISTEN consumer_jobs'")  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if (connection.execute(query).scalar() or 0) >= count:
                return
        time.sleep(0.1)
    raise SystemExit(f"fewer than {count} processes LISTEN after {timeout:g} s")


def enqueue_over_http(url: str, jobs: int, rate: float, max_seconds: float) -> dict[int, float]:
    """Job id -> when ``POST /jobs`` answered (its enqueue had committed)."""
    committed: dict[int, float] = {}
    started = time.monotonic()
    with requests.Session() as session:
        for n in range(jobs):
            if time.monotonic() - started > max_seconds:
                break
            answer = session.post(f"{url}/jobs", json={"kind": KIND}, timeout=30)
            committed[int(answer.json()["job"]["id"])] = time.time()
            time.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
    return committed


def measure_notify(database_url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Start the pods (no wake-up topic), enqueue in SQL, with Python's ``enqueue`` and over
    the job API, and time the starts of each."""
    env = {"CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_LOG_LEVEL": "WARNING", "CONSUMER_PLUGINS": "bench.start_latency"}  # fmt: skip
    engine = make_engine(database_url)  # attached to no wake-up target: NOTIFY alone
    metadata.create_all(engine)
    found: dict[str, list[float]] = {}
    with pods(args.pods, args.workers, env) as ports:
        wait_listening(engine, args.pods * args.workers)
        committed = enqueue_in_sql(database_url, args.jobs, args.rate, args.max_seconds)
        found["notify"] = latencies(engine, committed, 30)
        committed = enqueue_steadily(engine, args.jobs, args.rate, args.max_seconds)
        found["notify, python enqueue"] = latencies(engine, committed, 30)
        url = f"http://127.0.0.1:{ports[0]}"
        committed = enqueue_over_http(url, args.jobs, args.rate, args.max_seconds)
        found["notify, job API"] = latencies(engine, committed, 30)
    engine.dispose()
    return found


def line(found: list[float], floor: float) -> str:
    return (f"start latency: p50 {percentile(found, 0.5):.0f} ms, p99 {percentile(found, 0.99):.0f}"
            f" ms ({len(found)} jobs; emulator push alone: p50 {floor:.0f} ms)")  # fmt: skip


def notify_line(found: list[float], path: str = "notify") -> str:
    return (f"start latency ({path}): p50 {percentile(found, 0.5):.1f} ms, p99 "
            f"{percentile(found, 0.99):.1f} ms ({len(found)} jobs)")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="enqueues per second")
    parser.add_argument("--pods", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    topic_line = jobs_topic(args)
    with migrated_postgres_database(ADMIN, prefix="start_latency") as url:
        found = measure_notify(url, args)
    period = SWEEP_PERIOD_SECONDS
    print(f"tick only (sweep every {period} s): expected wait {period * 500} ms, worst "
          f"{period * 1000} ms")  # fmt: skip
    print(topic_line)
    for path, values in found.items():
        print(notify_line(values, path))


def jobs_topic(args: argparse.Namespace) -> str:
    """The jobs topic's line (Pub/Sub wake-ups), or why it was not measured."""
    if problem := stack.missing():
        return f"start latency (wake-up topic): not measured: {problem}"
    port, log = stack.free_port(), Path(os.environ.get("TMPDIR", "/tmp")) / "latency-pubsub.log"
    emulator = stack.start_pubsub(port, log, PROJECT)
    try:
        pubsub = f"127.0.0.1:{port}"
        floor = floor_ms(pubsub)
        with migrated_postgres_database(ADMIN, prefix="start_latency") as url:
            found = measure(pubsub, url, args)
    finally:
        emulator.stop()
    return line(found, floor)


if __name__ == "__main__":
    main()
