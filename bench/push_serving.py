"""The servers ``bench/push_bench.py`` measures, and how one run of one is measured: a fresh
migrated database with the floors' tables, each app under gunicorn on loopback (stopped by PID),
its environment, and the lineup of apps that ``--one-commit`` and ``--tracing`` extend."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from bench.push_floor_app import TABLES
from bench.push_load import Result, python_load, wrk_load
from bench.support.cpu import backends, children, cpu_seconds, spent
from bench.support.serving import free_port, wait_ready
from consumer.config.settings import Settings
from consumer.db.migrate import upgrade
from consumer.http.app import create_app
from consumer.service import Service

ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
APPS = {
    "consumer": "consumer.http.wsgi:app()",
    "floor": "bench.push_floor_app:app()",
    "2-writes": "bench.push_floor_app:two_writes()",
    "2w-wsgi": "bench.push_floor_app:two_writes_wsgi()",
}
ONE_COMMIT_APPS = {
    "1-commit": APPS["consumer"],
    "1c-floor": "bench.push_floor_app:one_commit()",
}
ONE_COMMIT_PLUGIN = "bench.one_commit_deploy"
WORKERS = {"sync": "sync", "asyncio": "consumer.http.worker.ConsumerWorker"}
"""``--worker`` -> gunicorn's ``-k``. The asyncio worker puts either Flask app behind the bridge."""


class Run(NamedTuple):
    result: Result
    app_cpu_ms: float
    """CPU time of the gunicorn workers per request."""
    db_cpu_ms: float
    """CPU time of the database's backends per request."""


@contextmanager
def database() -> Iterator[str]:
    """A fresh, migrated database with the floor's table; yields its conninfo, dropped after."""
    name = f"push_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    conninfo = f"{ADMIN.rsplit('/', 1)[0]}/{name}"
    try:
        upgrade(sqlalchemy_url(conninfo))
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for table, columns in TABLES.items():
                connection.execute(f"CREATE TABLE {table} ({columns})")
        yield conninfo
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sqlalchemy_url(conninfo: str) -> str:
    return conninfo.replace("postgresql://", "postgresql+psycopg://", 1)


def service_env(conninfo: str, synchronous_commit: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    return {
        **inherited,
        # Both servers' sessions alike (libpq reads PGOPTIONS): "off" takes the disk's flush
        # latency out of both sides, leaving the cost of the code paths themselves.
        "PGOPTIONS": f"-c synchronous_commit={synchronous_commit}",
        "CONSUMER_DATABASE_URL": sqlalchemy_url(conninfo),
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_PLUGINS": "bench.noop_deploy",
        "CONSUMER_LOG_LEVEL": "WARNING",
        "PUSH_FLOOR_CONNINFO": conninfo,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }


@contextmanager
def gunicorn(app: str, env: dict[str, str], worker: str) -> Iterator[tuple[str, int]]:
    """``gunicorn -w 2 -k WORKER`` on a free loopback port, yielding its URL and PID; stopped
    by its PID afterwards."""
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "-w", "2", "-k", WORKERS[worker],
        "--bind", f"127.0.0.1:{port}", "--no-control-socket", "--log-level", "warning", app,
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz", process, timeout=30)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure(
    app: str, env: dict[str, str], args: argparse.Namespace, run: int, name: str = ""
) -> Run:
    """One server's run. Its pushes' ids carry ``name``: servers that share the inbox (the
    consumer, ``traced``, ``1-commit``) must each push new events, not the same ids again,
    which they would answer as duplicates."""
    with gunicorn(app, env, args.worker) as (url, pid):
        load = wrk_load if shutil.which("wrk") else python_load
        load(url, args.connections, 2.0, f"warm{run}{name}")  # warm-up: connections, caches
        conninfo = env["PUSH_FLOOR_CONNINFO"]
        rows_before = inbox_rows(conninfo)
        app_before, db_before = cpu_seconds(children(pid)), cpu_seconds(backends(conninfo))
        result = load(url, args.connections, args.seconds, f"run{run}{name}")
        app_cpu = spent(app_before, cpu_seconds(children(pid)))
        db_cpu = spent(db_before, cpu_seconds(backends(conninfo)))
    requests_made = max(result.rps * args.seconds, 1.0)
    new_rows = inbox_rows(conninfo) - rows_before
    if app == APPS["consumer"] and new_rows < 0.98 * requests_made:
        raise RuntimeError(f"{name}: {new_rows} new inbox rows for {requests_made:.0f} pushes: "
                           "it measured duplicates, not new events")  # fmt: skip
    return Run(result, app_cpu * 1000 / requests_made, db_cpu * 1000 / requests_made)


def inbox_rows(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM inbox").fetchone()
    return int(row[0]) if row else 0


HOT = """
    SELECT CASE WHEN relname LIKE 'inbox%' THEN 'inbox' ELSE relname END AS name,
           sum(n_tup_hot_upd), sum(n_tup_upd) FROM pg_stat_user_tables
    WHERE relname = 'push_floor_two_writes' OR relid IN (
        SELECT inhrelid FROM pg_inherits WHERE inhparent = 'inbox'::regclass
        UNION ALL SELECT 'inbox'::regclass)
    GROUP BY 1 ORDER BY 1
"""
"""The inbox's partitions (PostgreSQL keeps the counts per partition) summed as ``inbox``."""


def hot_updates(conninfo: str) -> str:
    """HOT updates of all updates of the inbox and the two-writes table, e.g. ``inbox 0/1050``
    (the servers are stopped: their backends reported their counts as they ended)."""
    time.sleep(1)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        rows = connection.execute(HOT).fetchall()
    return ", ".join(f"{name} {hot}/{updates}" for name, hot, updates in rows)


def consumer_app(conninfo: str) -> Any:
    """The service in this process, as the benchmark serves it (the no-op deploy handler)."""
    settings = Settings(
        database_url=sqlalchemy_url(conninfo), local_mode=True, plugins=("bench.noop_deploy",)
    )
    return create_app(Service.of(settings))


def lineup(
    env: dict[str, str], receiver_url: str, one_commit: bool = False
) -> dict[str, tuple[str, dict[str, str]]]:
    """name -> (app, environment) of each server measured; ``traced`` with a receiver's URL,
    ``1-commit`` and ``1c-floor`` with ``one_commit``."""
    servers = {name: (app, env) for name, app in APPS.items()}
    if one_commit:
        one_commit_env = {**env, "CONSUMER_PLUGINS": ONE_COMMIT_PLUGIN}
        servers["1-commit"] = (ONE_COMMIT_APPS["1-commit"], one_commit_env)
        servers["1c-floor"] = (ONE_COMMIT_APPS["1c-floor"], env)
    if not receiver_url:
        return servers
    traced = {
        **env,
        "CONSUMER_TRACES_EXPORTER": "otlp",
        "CONSUMER_TRACES_ENDPOINT": receiver_url,
        "CONSUMER_TRACES_SAMPLE_PERCENT": "100",
    }
    return {"consumer": servers.pop("consumer"), "traced": (APPS["consumer"], traced), **servers}
