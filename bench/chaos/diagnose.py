"""What a chaos run prints when it lost something, or repeated something no fault explains:
enough to tell a stuck owner from a missing redelivery, or a pod that fails every request, without
the run's workdir (CI keeps only the report).

- the inbox rows that are not terminal: attempts, lease and claim, and when each last changed;
- the database's sessions that are not idle: a ``running`` row whose owner is stuck shows here as
  a statement waiting (on a lock, say), and an owner that is gone does not show at all;
- each pod's warnings, errors and critical lines (they log at WARNING in the harness; gunicorn's
  arbiter logs a worker that stopped beating, ``WORKER TIMEOUT``, at CRITICAL): how many, the
  commonest (message and the exception's last line: a pod answering 500 to everything shows
  here), and the last few.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

from sqlalchemy import Connection, Engine, select, text

from bench.chaos.ledger import TERMINAL
from consumer.inbox.schema import inbox

ACTIVITY = text(
    "SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS open_for, "
    "left(query, 160) AS query FROM pg_stat_activity "
    "WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()"
)
LEVELS = ("WARNING", "ERROR", "CRITICAL")
COMMONEST, LAST, WIDTH = 3, 8, 160


def diagnosis(engine: Engine, workdir: Path, started: float) -> list[str]:
    """Lines for the report (printed for a run that lost something or repeated something no
    fault explains)."""
    lines = ["diagnosis (something was lost, or repeated with no fault to explain it):"]
    with engine.connect() as connection:
        lines += ["unfinished inbox rows:", *(_rows(connection, started) or ["  none"])]
        lines += ["database sessions not idle:", *(_sessions(connection) or ["  none"])]
    for log in sorted(workdir.glob("pod-*.log")):
        lines += _pod(log)
    return lines


def _rows(connection: Connection, started: float) -> list[str]:
    rows = connection.execute(
        select(inbox.c.key, inbox.c.status, inbox.c.attempts, inbox.c.lease_until,
               inbox.c.claimed_by, inbox.c.created_at, inbox.c.updated_at)
        .where(inbox.c.status.not_in(TERMINAL))
    ).all()  # fmt: skip
    return [
        f"  {r.key}: {r.status}, attempts {r.attempts}, claimed by {r.claimed_by}, lease "
        f"until {_at(r.lease_until, started)}, created {_at(r.created_at, started)}, last "
        f"changed {_at(r.updated_at, started)}"
        for r in rows
    ]


def _sessions(connection: Connection) -> list[str]:
    return [
        f"  pid {a.pid} {a.state} wait {a.wait_event_type}/{a.wait_event} open "
        f"{a.open_for}: {a.query}"
        for a in connection.execute(ACTIVITY)
    ]


def _pod(log: Path) -> list[str]:
    """How many warnings or worse, the most common kinds, then the last few."""
    entries = [_entry(line) for line in log.read_text(errors="replace").splitlines()]
    warnings = [entry for entry in entries if entry is not None]
    kinds = Counter(f"{severity} {what}" for _, severity, what in warnings)
    if not warnings:
        return [f"{log.name}: no warnings"]
    lines = [f"{log.name}: {len(warnings)} warnings or worse; the commonest:"]
    lines += [f"  {count} x {kind}" for kind, count in kinds.most_common(COMMONEST)]
    lines.append("  the last:")
    return lines + [f"    {at} {severity} {what}" for at, severity, what in warnings[-LAST:]]


def _entry(line: str) -> tuple[str, str, str] | None:
    """``(time, severity, message | the exception's last line)`` of a pod's warning, error or
    critical line (but the local-mode banner every pod starts with), else ``None``; a line
    that is not JSON is kept whole if it names such a level."""
    try:
        entry = json.loads(line)
        severity, message = str(entry["severity"]), str(entry["message"])
    except (ValueError, KeyError, TypeError):
        level = next((level for level in LEVELS if f'"{level}"' in line), None)
        return None if level is None else ("-", level, line[:WIDTH])
    if severity not in LEVELS or "LOCAL MODE" in message:
        return None
    raised = str(entry.get("exception", "")).strip().splitlines()
    what = message[:WIDTH] + (f" | {raised[-1][:WIDTH]}" if raised else "")
    return str(entry.get("time", "-"))[11:23], severity, what


def _at(moment: datetime | None, started: float) -> str:
    return "-" if moment is None else f"t={moment.timestamp() - started:.1f} s"
