"""What a chaos run prints when it lost something: enough to tell a stuck owner from a missing
redelivery without the run's workdir (CI keeps only the report).

- the inbox rows that are not terminal: attempts, lease and claim, and when each last changed;
- the database's sessions that are not idle: a ``running`` row whose owner is stuck shows here as
  a statement waiting (on a lock, say), and an owner that is gone does not show at all;
- the pods' last warnings, errors and critical lines (they log at WARNING in the harness;
  gunicorn's arbiter logs a worker that stopped beating, ``WORKER TIMEOUT``, at CRITICAL).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine, select, text

from bench.chaos_ledger import TERMINAL
from consumer.inbox.schema import inbox

ACTIVITY = text(
    "SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS open_for, "
    "left(query, 160) AS query FROM pg_stat_activity "
    "WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()"
)
WARNINGS_PER_POD = 8
LEVELS = ("WARNING", "ERROR", "CRITICAL")


def diagnosis(engine: Engine, workdir: Path, started: float) -> list[str]:
    """Lines for the report (printed only for a run that lost something)."""
    lines = ["diagnosis (the run lost something):", "unfinished inbox rows:"]
    with engine.connect() as connection:
        rows = connection.execute(
            select(inbox.c.key, inbox.c.status, inbox.c.attempts, inbox.c.lease_until,
                   inbox.c.claimed_by, inbox.c.created_at, inbox.c.updated_at)
            .where(inbox.c.status.not_in(TERMINAL))
        ).all()  # fmt: skip
        lines += [
            f"  {r.key}: {r.status}, attempts {r.attempts}, claimed by {r.claimed_by}, lease "
            f"until {_at(r.lease_until, started)}, created {_at(r.created_at, started)}, last "
            f"changed {_at(r.updated_at, started)}"
            for r in rows
        ] or ["  none"]
        lines.append("database sessions not idle:")
        lines += [
            f"  pid {a.pid} {a.state} wait {a.wait_event_type}/{a.wait_event} open "
            f"{a.open_for}: {a.query}"
            for a in connection.execute(ACTIVITY)
        ] or ["  none"]
    for log in sorted(workdir.glob("pod-*.log")):
        warnings = [line for line in log.read_text(errors="replace").splitlines() if _warns(line)]
        lines.append(f"{log.name}: {len(warnings)} warnings or worse, the last:")
        lines += [f"  {line[:300]}" for line in warnings[-WARNINGS_PER_POD:]]
    return lines


def _warns(line: str) -> bool:
    """A warning, an error or a critical line of a pod, but the local-mode banner every pod
    starts with."""
    return any(f'"{level}"' in line for level in LEVELS) and "LOCAL MODE" not in line


def _at(moment: datetime | None, started: float) -> str:
    return "-" if moment is None else f"t={moment.timestamp() - started:.1f} s"
