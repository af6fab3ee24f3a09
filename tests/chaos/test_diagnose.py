"""What a chaos run that lost something prints about it, on a real PostgreSQL database with a
session left waiting on a row lock (the stuck-owner case)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, insert, text

from bench.chaos.diagnose import diagnosis
from consumer.inbox.schema import inbox

pytestmark = pytest.mark.postgres
STARTED = datetime(2026, 12, 3, 8, 41, 54, tzinfo=UTC)


def row(key: str, status: str, claimed_by: str | None = None) -> dict[str, object]:
    at = STARTED + timedelta(seconds=59)
    return {"key": key, "route": "tick", "status": status, "attempts": 1,
            "claimed_by": claimed_by, "lease_until": at + timedelta(seconds=3),
            "message_id": "m", "message": {}, "created_at": at, "updated_at": at}  # fmt: skip


def waiting_on(connection: Connection, key: str) -> None:
    """A second session that waits on the row the first one holds locked (stopped at 5 s)."""
    connection.execute(text("SET lock_timeout = '5s'"))
    connection.execute(text("SELECT 1 FROM inbox WHERE key = :key FOR UPDATE"), {"key": key})


def until_a_lock_wait(engine: Engine, timeout: float = 5.0) -> None:
    """Until some session of this database waits on a lock (the waiter is blocked)."""
    query = text("SELECT count(*) FROM pg_stat_activity "
                 "WHERE datname = current_database() AND wait_event_type = 'Lock'")  # fmt: skip
    deadline = time.monotonic() + timeout
    with engine.connect() as connection:
        while not connection.execute(query).scalar_one():
            assert time.monotonic() < deadline, "the second session never waited on the lock"
            connection.rollback()
            time.sleep(0.02)


def test_the_unfinished_rows_a_waiting_session_and_the_pods_warnings_are_printed(
    pg_engine: Engine, tmp_path: Path
) -> None:
    with pg_engine.begin() as connection:
        connection.execute(insert(inbox), [row("tick:sweep:a", "running", "pod/1/x"),
                                           row("tick:sweep:b", "done")])  # fmt: skip
    at = "2026-12-03T08:42:54.123456Z"
    warning = {"time": at, "severity": "WARNING", "message": "recording results failed, retrying"}
    local = {"severity": "WARNING", "message": "LOCAL MODE: push requests are NOT authenticated"}
    timeout = {"time": at, "severity": "CRITICAL", "message": "WORKER TIMEOUT (pid:4242)"}
    failed = {
        "time": at,
        "severity": "ERROR",
        "message": "Exception on /push [POST]",
        "exception": "Traceback (most recent call last):\n  ...\nFileNotFoundError: x.db",
    }
    info = {"time": at, "severity": "INFO", "message": "Booting worker with pid: 4243"}
    entries = (local, warning, timeout, info, failed, failed)
    lines = [json.dumps(entry) for entry in entries] + ['{"severity": "ERROR", "message": "cut']
    (tmp_path / "pod-1.1.log").write_text("\n".join(lines) + "\n")
    with pg_engine.connect() as holder, pg_engine.connect() as waiter:
        holder.execute(text("SELECT 1 FROM inbox WHERE key = 'tick:sweep:a' FOR UPDATE"))
        blocked = threading.Thread(target=waiting_on, args=(waiter, "tick:sweep:a"))
        blocked.start()
        until_a_lock_wait(pg_engine)
        lines = diagnosis(pg_engine, tmp_path, STARTED.timestamp())
        holder.rollback()
        blocked.join()
    report = "\n".join(lines)
    assert "tick:sweep:a: running, attempts 1, claimed by pod/1/x" in report, report
    assert "created t=59.0 s" in report and "tick:sweep:b" not in report, report
    assert "active wait Lock/" in report and "FOR UPDATE" in report, report
    assert "pod-1.1.log: 5 warnings or worse" in report and "LOCAL MODE" not in report, report
    assert "  2 x ERROR Exception on /push [POST] | FileNotFoundError: x.db" in report, report
    assert "    08:42:54.123 CRITICAL WORKER TIMEOUT (pid:4242)" in report, report
    assert "Booting worker" not in report, report
