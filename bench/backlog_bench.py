"""Backlog bench: how long a large backlog of due jobs takes to drain, with and without
continuations (not a test).

Each mode gets a fresh PostgreSQL database holding ``--jobs`` due no-op jobs, one gunicorn server
(``--workers`` sync workers) whose handler budget is ``--budget`` seconds, and Google's Pub/Sub
emulator pushing a ``continuations`` topic to that server. A scheduler stand-in posts a ``sweep``
tick every ``--tick-seconds`` (a new slot each time) until every job is done, or until
``--max-seconds`` have passed (the figure is then a lower bound, marked ``>``).

  without  CONSUMER_CONTINUATION_TOPIC unset: each slice waits for the next tick.
  with     the topic set: a sweep that stops on its budget publishes continuations (fan-out
           ``--fanout``), pushed back by the emulator to whichever worker is free.

    python -m bench.backlog_bench [--jobs 200000] [--budget 10] [--tick-seconds 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
PROJECT = "backlog-bench"
FILL = """
INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, updated_at)
SELECT 'noop', '{}', 'pending', 0, now(), 0, now(), now() FROM generate_series(1, %s)
"""


def register(registry: Any) -> None:
    """Plugin hook (CONSUMER_PLUGINS=bench.backlog_bench): the no-op job kind."""
    registry.job_kinds.add("noop", lambda context, job: None)


@contextmanager
def database(jobs: int) -> Iterator[str]:
    """A migrated database holding ``jobs`` due no-op jobs; yields its SQLAlchemy URL."""
    from consumer.db.migrate import upgrade

    name = f"backlog_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    conninfo = f"{ADMIN.rsplit('/', 1)[0]}/{name}"
    try:
        upgrade(conninfo.replace("postgresql://", "postgresql+psycopg://"))
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(FILL, [jobs])
            connection.execute("VACUUM ANALYZE jobs")
        yield conninfo
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pending(conninfo: str) -> int:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute("SELECT count(*) FROM jobs WHERE status <> 'done'").fetchone()
    return int(row[0]) if row else -1


@contextmanager
def server(env: dict[str, str], workers: int, ack_deadline: int) -> Iterator[str]:
    from triggers.local.stack import free_port

    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers",
        str(workers), "--timeout", str(ack_deadline), "--no-control-socket",
        "consumer.http.wsgi:app()",
    ]  # fmt: skip
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    inherited["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    process = subprocess.Popen(command, env={**inherited, **env}, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if requests.get(f"{url}/healthz", timeout=5).ok:
                return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not start")


def drain(args: argparse.Namespace, pubsub: str, continuation: bool) -> dict[str, Any]:
    """One mode: ticks every ``--tick-seconds`` until the backlog is gone (or time is up)."""
    from triggers.local.stack import ensure_push_subscription, ensure_topic

    topic_name = f"continuations-{uuid.uuid4().hex[:6]}"
    with database(args.jobs) as conninfo:
        env = {
            "CONSUMER_DATABASE_URL": conninfo.replace("postgresql://", "postgresql+psycopg://"),
            "CONSUMER_LOCAL_MODE": "true", "CONSUMER_LOG_LEVEL": "WARNING",
            "CONSUMER_PLUGINS": "bench.backlog_bench",
            "CONSUMER_ACK_DEADLINE_SECONDS": str(args.budget + 10),
            "CONSUMER_SAFETY_MARGIN_SECONDS": "10",
            "CONSUMER_TICK_PERIODS": f"sweep={args.tick_seconds}",
            "CONSUMER_CONTINUATION_FANOUT": str(args.fanout), "PUBSUB_EMULATOR_HOST": pubsub,
        }  # fmt: skip
        if continuation:
            env["CONSUMER_CONTINUATION_TOPIC"] = f"projects/{PROJECT}/topics/{topic_name}"
        with server(env, args.workers, args.budget + 10) as url:
            ensure_topic(pubsub, PROJECT, topic_name)
            ensure_push_subscription(
                pubsub, PROJECT, f"{topic_name}-push", topic_name, f"{url}/push", args.budget + 10
            )
            return tick_until_drained(args, url, conninfo)


def tick_until_drained(args: argparse.Namespace, url: str, conninfo: str) -> dict[str, Any]:
    from consumer.wire.envelopes_out import tick_body

    started, ticks, next_tick = time.monotonic(), 0, 0.0
    while (left := pending(conninfo)) > 0:
        now = time.monotonic() - started
        if now > args.max_seconds:
            return {"seconds": now, "ticks": ticks, "left": left}
        if now >= next_tick:
            ticks += 1
            next_tick += args.tick_seconds
            body = tick_body("sweep")  # the scheduler does not wait for the sweep
            threading.Thread(target=post, args=(url, body), daemon=True).start()
        time.sleep(0.2)
    return {"seconds": time.monotonic() - started, "ticks": ticks, "left": 0}


def post(url: str, body: dict[str, Any]) -> None:
    try:
        requests.post(f"{url}/push", json=body, timeout=120)
    except requests.RequestException as exc:
        print(f"tick failed: {exc}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--budget", type=int, default=10, help="handler budget, seconds")
    parser.add_argument("--tick-seconds", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args()
    from triggers.local.stack import free_port, missing, start_pubsub

    if problem := missing():
        raise SystemExit(f"the Pub/Sub emulator is needed: {problem}")
    port = free_port()
    emulator = start_pubsub(port, Path(tempfile.mkdtemp()) / "emulator.log", PROJECT)
    try:
        host = f"127.0.0.1:{port}"
        rows = {mode: drain(args, host, mode == "with") for mode in ("without", "with")}
    finally:
        emulator.stop()
    print(
        f"\n{args.jobs} due no-op jobs, budget {args.budget} s, a tick every {args.tick_seconds} s,"
        f" {args.workers} gunicorn workers, fan-out {args.fanout}, {os.cpu_count()} CPUs"
    )
    print(f"{'continuation':<14}{'drain s':>10}{'ticks':>7}{'jobs left':>11}{'jobs/s':>9}")
    for mode, row in rows.items():
        bound = ">" if row["left"] else ""
        rate = (args.jobs - row["left"]) / row["seconds"]
        seconds = f"{bound}{row['seconds']:.1f}"
        print(f"{mode:<14}{seconds:>10}{row['ticks']:>7}{row['left']:>11}{rate:>9.0f}")
    without, with_ = rows["without"]["seconds"], rows["with"]["seconds"]
    print(f"speed-up with continuation: {without / with_:.1f}x")


if __name__ == "__main__":
    main()
