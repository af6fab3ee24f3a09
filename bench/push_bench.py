"""Benchmark ``POST /push`` against its floor on PostgreSQL (not a test).

Both servers run under the same gunicorn settings (``-w 2``, loopback, ``--worker sync``: gunicorn's
sync worker, or ``--worker asyncio``: production's ``consumer.http.worker.ConsumerWorker``, whose
buffering bridge then serves both apps with the same threads) on one fresh database:
  consumer  the real service, a new deploy event per request (parse, classify, claim, handler,
            finish), with a no-op deploy handler (``bench.noop_deploy``) so warming is not measured;
  floor     a minimal Flask route doing one ``INSERT ... ON CONFLICT DO NOTHING``
            (``bench.push_floor_app:app()``);
  2-writes  the same route doing the two durable statements any exactly-once design needs, a
            claim before the handler and the outcome before the answer
            (``bench.push_floor_app:two_writes()``): the ceiling of the consumer's ratio;
  2w-wsgi   the same two writes answered before Flask, by WSGI middleware, as the consumer
            answers ``/push`` (``bench.push_floor_app:two_writes_wsgi()``): the ratio to it is
            what the consumer costs beyond the writes, framework savings aside.
Each is driven with ``--connections`` keep-alive connections for ``--seconds``, alternately,
``--repeat`` times; the medians of req/s, p50 and p99 are printed with the ratio consumer/floor
(target >= 0.6, p99 < 25 ms), and the CPU each request cost the gunicorn workers and the
PostgreSQL backends (read from /proc: steadier than rates on a shared machine). The load
generator is ``wrk`` (Debian package) with a Lua script when it is installed, else a Python one
with keep-alive connections; the output says which. The last line sets the consumer's CPU
per push beside the two-writes route's (``push cpu: ...``).

``--one-commit`` adds ``1-commit``: the consumer with the same no-op deploy handler declared a
one-commit handler (``bench.one_commit_deploy``: claim and outcome in one transaction), and
``1c-floor``, the floor route writing the claim and the outcome in one transaction
(``bench.push_floor_app:one_commit()``), and prints their ratios to the one-insert floor
(target for ``1-commit`` >= 0.90) and ``1-commit``/``consumer``.

``--tracing`` adds ``traced``: the consumer with OpenTelemetry on, every trace sampled, its spans
exported over OTLP/HTTP to a local receiver that parses each request and counts its spans
(``bench.support.otlp_receiver``; it keeps none, as a collector on another machine would cost
this one nothing), and prints the ratio traced/consumer (target >= 0.90) and the app CPU per
request of each (the span cost itself, whatever else the machine does).

    python -m bench.push_bench [--seconds 10] [--repeat 3] [--connections 16]
                               [--worker sync|asyncio] [--one-commit] [--tracing]
                               [--profile | --phases]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import requests

from bench.push_floor_app import TABLES
from bench.push_load import Result, python_load, wrk_load
from bench.support.cpu import backends, children, cpu_seconds, spent
from bench.support.otlp_receiver import Receiver
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
        wait_ready(url, process)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[Any], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}")
        try:
            if requests.get(f"{url}/healthz", timeout=5).ok:
                return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError("gunicorn did not become ready")


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


def consumer_app(conninfo: str) -> Any:
    """The service in this process, as the benchmark serves it (the no-op deploy handler)."""
    settings = Settings(
        database_url=sqlalchemy_url(conninfo), local_mode=True, plugins=("bench.noop_deploy",)
    )
    return create_app(Service.of(settings))


def profile(conninfo: str, requests_count: int = 1500) -> None:
    """The push path in process under cProfile (Flask's test client, no HTTP)."""
    import cProfile
    import pstats

    from bench.push_load import deploy_body

    client = consumer_app(conninfo).test_client()
    bodies = [deploy_body(f"profile-{n}") for n in range(requests_count)]
    profiler = cProfile.Profile()
    profiler.enable()
    for body in bodies:
        client.post("/push", data=body, content_type="application/json")
    profiler.disable()
    pstats.Stats(profiler).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(30)


PHASES = (
    ("consumer.db.prepared", "Prepared.first", "the claim statement"),
    ("consumer.db.prepared", "Prepared.rowcount", "the finish statement"),
    ("consumer.pipeline.dispatch", "Dispatcher._handle", "claim, handler, finish"),
    ("consumer.pipeline.dispatch", "Dispatcher.dispatch", "the whole decision"),
    ("consumer.http.door", "GatedWsgi.__call__", "the request in the door"),
    ("consumer.http.door", "answer", "the JSON answer"),
)
"""(module, attribute, label) of what ``--phases`` times."""


def phases(conninfo: str, requests_count: int = 4000) -> None:
    """Thread CPU per request of each phase of the push path, in process (each timed function
    wrapped; nested phases include their children): where a push's CPU goes, without cProfile's
    per-call overhead. The request itself is timed through Flask's test client."""
    import functools
    import importlib

    from bench.push_load import deploy_body

    spent = dict.fromkeys((label for *_, label in PHASES), 0.0)

    def timed(function: Any, label: str) -> Any:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - started

        return wrapper

    for module_name, attribute, label in PHASES:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, timed(getattr(owner, name), label))
    client = consumer_app(conninfo).test_client()
    bodies = [deploy_body(f"phases-{n}") for n in range(requests_count + 300)]
    for body in bodies[:300]:  # warm-up: connections, prepared statements
        client.post("/push", data=body, content_type="application/json")
    spent = dict.fromkeys(spent, 0.0)
    started = time.thread_time()
    for body in bodies[300:]:
        client.post("/push", data=body, content_type="application/json")
    total = time.thread_time() - started
    print(f"thread CPU per request, in process, {requests_count} pushes (nested phases overlap):")
    print(f"  {'the request through Flask':<26} {total / requests_count * 1e6:7.1f} us")
    for label, seconds in spent.items():
        print(f"  {label:<26} {seconds / requests_count * 1e6:7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="PostgreSQL's synchronous_commit for both servers ('off': no wait for the disk)",
    )
    parser.add_argument("--worker", choices=sorted(WORKERS), default="sync")
    parser.add_argument(
        "--tracing", action="store_true", help="also the consumer with tracing on (OTLP/HTTP)"
    )
    parser.add_argument(
        "--one-commit",
        action="store_true",
        help="also the consumer with a one-commit handler, and its floor route",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the push path instead")
    parser.add_argument(
        "--phases", action="store_true", help="thread CPU per phase of a push, in process"
    )
    args = parser.parse_args()
    with database() as conninfo:
        if args.profile:
            profile(conninfo)
            return
        if args.phases:
            phases(conninfo)
            return
        env = service_env(conninfo, args.synchronous_commit)
        with Receiver(keep=False).running() as receiver:
            servers = lineup(env, receiver.url if args.tracing else "", args.one_commit)
            results: dict[str, list[Run]] = {name: [] for name in servers}
            for run in range(args.repeat):
                for name, (app, app_env) in servers.items():
                    results[name].append(measure(app, app_env, args, run, name))
                    last = results[name][-1]
                    cpu = f"CPU/request: app {last.app_cpu_ms:.2f} ms, db {last.db_cpu_ms:.2f} ms"
                    print(f"  run {run + 1} {name:<8} {last.result}  {cpu}", flush=True)
            exported = receiver.count
    report(results, args)
    if args.one_commit:
        report_one_commit(results)
    if args.tracing:
        report_tracing(results, exported)
    print(cpu_line(results))


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


def report_one_commit(results: dict[str, list[Run]]) -> None:
    """The one-commit push against the one-insert floor and the two-commit push, same run."""
    rps = {name: median_of(runs)[0] for name, runs in results.items()}
    print(
        f"  ratio 1-commit/floor {rps['1-commit'] / rps['floor']:.2f}x (target >= 0.90); "
        f"1c-floor/floor {rps['1c-floor'] / rps['floor']:.2f}x (its ceiling); "
        f"1-commit/consumer {rps['1-commit'] / rps['consumer']:.2f}x"
    )


def report_tracing(results: dict[str, list[Run]], exported: int) -> None:
    """Tracing on against off, in the same run."""
    traced, plain = median_of(results["traced"]), median_of(results["consumer"])
    ratio = traced[0] / plain[0]
    print(
        f"  ratio traced/consumer {ratio:.2f}x (target >= 0.90); app CPU/request traced "
        f"{traced[4]:.2f} ms, untraced {plain[4]:.2f} ms; {exported} spans received"
    )


def report(results: dict[str, list[Run]], args: argparse.Namespace) -> None:
    generator = "wrk (Lua script)" if shutil.which("wrk") else "python keep-alive load generator"
    print(f"\n/push on PostgreSQL (synchronous_commit={args.synchronous_commit}), gunicorn -w 2 "
          f"-k {WORKERS[args.worker]}, {args.connections} connections, {args.seconds:g} s x "
          f"{args.repeat}, {generator}; medians:")  # fmt: skip
    medians = {name: median_of(runs) for name, runs in results.items()}
    for name, (rps, p50, p99, errors, app_cpu, db_cpu) in medians.items():
        cpu = f"CPU/request: app {app_cpu:.2f} ms, db {db_cpu:.2f} ms"
        print(f"  {name:<8} {rps:8.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
              f"non-2xx {errors:.0f}  {cpu}")  # fmt: skip
    ratio = medians["consumer"][0] / medians["floor"][0]
    p99 = medians["consumer"][2]
    ceiling = medians["2-writes"][0] / medians["floor"][0]
    print(f"  ratio consumer/floor {ratio:.2f}x (target >= 0.60); consumer p99 {p99:.1f} ms "
          f"(target < 25)")  # fmt: skip
    print(f"  ratio 2-writes/floor {ceiling:.2f}x (the ceiling of any claim-then-finish design); "
          f"consumer/2-writes {ratio / ceiling:.2f}x (target >= 0.90)")  # fmt: skip
    unframed = medians["consumer"][0] / medians["2w-wsgi"][0]
    print(f"  ratio consumer/2w-wsgi {unframed:.2f}x (the two writes answered before Flask, as "
          "the consumer answers /push)")  # fmt: skip


def cpu_line(results: dict[str, list[Run]]) -> str:
    """The bench's last line: CPU per push (gunicorn workers + the database's backends) beside
    the two-writes route's, same run, medians of repeats; steadier than rates on a shared
    machine. ``n/a`` where a reading is zero: /proc did not show those processes' CPU."""
    (worker, db), floor = cpu_us(results["consumer"]), cpu_us(results["2-writes"])
    if min(worker, db, *floor) <= 0:
        return "push cpu: consumer n/a us/push (worker n/a, db n/a) vs two-writes n/a us: n/a x"
    total = worker + db
    return (f"push cpu: consumer {total:.1f} us/push (worker {worker:.1f}, db {db:.1f}) "
            f"vs two-writes {sum(floor):.1f} us: {total / sum(floor):.2f} x")  # fmt: skip


def cpu_us(runs: list[Run]) -> tuple[float, float]:
    """Median worker and database CPU per request, in microseconds."""
    worker = statistics.median(run.app_cpu_ms for run in runs)
    return worker * 1000, statistics.median(run.db_cpu_ms for run in runs) * 1000


def median_of(runs: list[Run]) -> tuple[float, ...]:
    return (
        statistics.median(r.result.rps for r in runs),
        statistics.median(r.result.p50_ms for r in runs),
        statistics.median(r.result.p99_ms for r in runs),
        statistics.median(r.result.errors for r in runs),
        statistics.median(r.app_cpu_ms for r in runs),
        statistics.median(r.db_cpu_ms for r in runs),
    )


if __name__ == "__main__":
    main()
