"""Worker deaths read from the pods' logs (no processes): the watchdog's own exit and gunicorn's
lines for a worker that timed out, was signalled or exited, each death recorded once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, create_engine, text

from bench.chaos.faults import Fault
from bench.chaos.watch import ExitWatcher

AT = datetime(2026, 12, 1, 23, 16, 44, 977510, UTC)
WATCHDOG = "a request outlived the ack deadline; the worker exits so it cannot run on"


def line(seconds: float, severity: str, message: str, **extra: object) -> str:
    at = (AT + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    return json.dumps({"time": at, "severity": severity, "message": message, **extra})


def claims(tmp_path: Path) -> Engine:
    """The two tables ``held_by`` reads, with job 7 running, claimed by worker 501."""
    engine = create_engine(f"sqlite:///{tmp_path / 'claims.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE jobs (id INTEGER, status TEXT, claimed_by TEXT)"))
        connection.execute(text("CREATE TABLE inbox (key TEXT, status TEXT)"))
        connection.execute(text("INSERT INTO jobs VALUES (7, 'running', 'pod/501/abc')"))
    return engine


def watched(tmp_path: Path, lines: list[str], pod: str = "pod-2.1.log") -> list[Fault]:
    (tmp_path / pod).write_text("\n".join(lines) + '\n{"time": ')  # a line still being written
    engine = claims(tmp_path)
    seen: list[Fault] = []
    watcher = ExitWatcher(tmp_path, engine, seen.append)
    watcher.stop()  # one scan
    watcher.stop()  # a second scan finds nothing new
    return seen


def test_a_worker_s_own_exit_in_a_pod_s_log_is_recorded_once_as_an_observed_fault(
    tmp_path: Path,
) -> None:
    seen = watched(tmp_path, ['{"message": "LOCAL MODE"}', line(0, "ERROR", WATCHDOG, pid=4242)])
    assert [(f.kind, f.name, f.held_jobs) for f in seen] == [
        ("worker-exit", "worker-exit #1 (pod-2, observed: watchdog)", frozenset())
    ]
    assert seen[0].start == AT.timestamp()


def test_gunicorn_s_worker_timeouts_kills_and_exits_are_each_one_death(tmp_path: Path) -> None:
    seen = watched(tmp_path, [
        line(0, "CRITICAL", "WORKER TIMEOUT (pid:501)"),
        line(1, "ERROR", "Worker (pid:501) was sent SIGKILL! Perhaps out of memory?"),
        line(2, "ERROR", "Worker (pid:502) was sent SIGKILL! Perhaps out of memory?"),
        line(3, "ERROR", WATCHDOG, pid=503),
        line(3.1, "ERROR", "Worker (pid:503) exited with code 1."),
        line(4, "INFO", "Worker (pid:504) was sent SIGTERM!"),  # a clean stop
        line(5, "WARNING", "Worker (pid:505) was sent SIGABRT!"),
        line(6, "ERROR", "Worker (pid:506) exited with code 3."),
        line(70, "CRITICAL", "WORKER TIMEOUT (pid:501)"),  # a reused PID, a minute later
    ])  # fmt: skip
    assert [(f.name, f.start - AT.timestamp()) for f in seen] == [
        ("worker-exit #1 (pod-2, observed: WORKER TIMEOUT)", 0.0),
        ("worker-exit #2 (pod-2, observed: SIGKILL)", 2.0),
        ("worker-exit #3 (pod-2, observed: watchdog)", 3.0),
        ("worker-exit #4 (pod-2, observed: SIGABRT)", 5.0),
        ("worker-exit #5 (pod-2, observed: exit code 3)", 6.0),
        ("worker-exit #6 (pod-2, observed: WORKER TIMEOUT)", 70.0),
    ]
    assert all(f.kind == "worker-exit" and f.end == f.start for f in seen)
    assert [f.held_jobs for f in seen[:2]] == [frozenset({7}), frozenset()]


def test_deaths_are_numbered_in_the_order_they_happened_across_pods(tmp_path: Path) -> None:
    (tmp_path / "pod-1.1.log").write_text(line(5, "ERROR", WATCHDOG, pid=601) + "\n")
    seen = watched(tmp_path, [line(2, "CRITICAL", "WORKER TIMEOUT (pid:602)")])
    assert [f.name for f in seen] == ["worker-exit #1 (pod-2, observed: WORKER TIMEOUT)",
                                      "worker-exit #2 (pod-1, observed: watchdog)"]  # fmt: skip
