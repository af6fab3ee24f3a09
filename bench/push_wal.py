"""What each push writes to PostgreSQL's WAL, for the consumer and the two floors of
``bench/push_bench.py`` (not a test).

Every durable commit waits for the WAL to reach the disk, and a gunicorn sync worker waits with
it, so the bytes a request writes are part of what it costs beside the CPU. Each app runs in
process (Flask's test client, no HTTP) on one fresh database; after a warm-up and a
``CHECKPOINT``, ``--requests`` pushes are made and the WAL position's advance is divided among
them. ``--records`` adds ``pg_waldump --stats=record`` over the same range (which records make
it up), when the server's WAL directory is readable (run as the database's owner or root).

    python -m bench.push_wal [--requests 3000] [--records]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.push_load import deploy_body
from bench.push_serving import consumer_app, database

WARM_UP = 300


def apps(conninfo: str) -> dict[str, Any]:
    """The three apps of ``push_bench``, built in this process."""
    from bench.push_floor_app import app, two_writes

    os.environ["PUSH_FLOOR_CONNINFO"] = conninfo
    return {"consumer": consumer_app(conninfo), "floor": app(), "2-writes": two_writes()}


def wal_per_request(admin: psycopg.Connection[Any], push: Callable[[bytes], None], name: str,
                    requests: int) -> tuple[float, str, str]:  # fmt: skip
    """(WAL bytes per request, start and end positions) of ``requests`` new pushes."""
    for number in range(WARM_UP):
        push(deploy_body(f"{name}-warm-{number}"))
    admin.execute("CHECKPOINT")
    bodies = [deploy_body(f"{name}-{number}") for number in range(requests)]
    start = _position(admin)
    for body in bodies:
        push(body)
    end = _position(admin)
    row = admin.execute("SELECT pg_wal_lsn_diff(%s, %s)", (end, start)).fetchone()
    assert row is not None
    return float(row[0]) / requests, start, end


def _position(admin: psycopg.Connection[Any]) -> str:
    row = admin.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def record_stats(admin: psycopg.Connection[Any], start: str, end: str) -> str:
    """``pg_waldump --stats=record`` of the range, or why it could not run."""
    row = admin.execute("SHOW data_directory").fetchone()
    directory = Path(str(row[0] if row else "")) / "pg_wal"
    version = admin.info.server_version // 10000
    waldump = shutil.which("pg_waldump") or f"/usr/lib/postgresql/{version}/bin/pg_waldump"
    if not os.access(directory, os.R_OK) or not Path(waldump).exists():
        return f"  (pg_waldump or {directory} not readable here)"
    command = [waldump, "-p", str(directory), "-s", start, "-e", end, "--stats=record"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.stdout or done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--records", action="store_true", help="print pg_waldump's record stats")
    args = parser.parse_args()
    with database() as conninfo, psycopg.connect(conninfo, autocommit=True) as admin:
        for name, flask_app in apps(conninfo).items():
            client = flask_app.test_client()

            def push(body: bytes, client: Any = client) -> None:
                answer = client.post("/push", data=body, content_type="application/json")
                assert answer.status_code == 200, answer.get_data(as_text=True)

            per_request, start, end = wal_per_request(admin, push, name, args.requests)
            print(f"{name:<9} {per_request:7.0f} WAL bytes per push ({args.requests} pushes)")
            if args.records:
                print(record_stats(admin, start, end))


if __name__ == "__main__":
    main()
