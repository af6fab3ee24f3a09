"""The SQL function from Node.js: ``tests/jobs/sql_enqueue.js`` (real ``node``, ``pg`` from npm,
installed into this test's scratch directory) against three consumer processes on PostgreSQL.
A rolled-back enqueue leaves no job; 50 committed ones each start within moments of their
commit (the p50 is printed); the same key is one job; an unknown kind is SQLSTATE 22023."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.conftest import Server
from tests.jobs.test_sql_enqueue import db, listening, server_env  # noqa: F401 (fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
NODE, NPM = shutil.which("node"), shutil.which("npm")
PROGRAM = Path(__file__).with_name("sql_enqueue.js")
PG_VERSION = "pg@8"
P50_BOUND_MS = 50.0
"""The aim is 10 ms (a few ms here, see docs/jobs.md); the bound leaves room for a loaded CI."""


@pytest.fixture(scope="session")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pg`` from npm, installed once per run into the run's scratch, never into the tree."""
    if NODE is None or NPM is None:
        pytest.skip("node and npm are not installed (scripts/ensure-node installs Debian's nodejs)")
    scratch = tmp_path_factory.mktemp("node")
    command = [NPM, "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(scratch),
               PG_VERSION]  # fmt: skip
    subprocess.run(command, check=True, timeout=300, capture_output=True)
    return scratch / "node_modules"


def test_node_enqueues_in_its_own_transactions_and_jobs_start_at_once(
    db: Engine,  # noqa: F811
    postgres_url: str,
    tmp_path: Path,
    node_modules: Path,
    start_server: Callable[..., Server],
) -> None:
    for _ in range(3):
        start_server(server_env(postgres_url, tmp_path), workers=1)
    listening(db, 3)
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    env = {**os.environ, "NODE_PATH": str(node_modules), "DATABASE_URL": url, "JOBS": "50"}
    done = subprocess.run(
        [str(NODE), str(PROGRAM)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    print(done.stderr.strip())  # start latency (notify, node): p50 N ms, p99 N ms (50 jobs)
    result = json.loads(done.stdout)
    assert result["after_rollback"] == 0
    assert result["jobs"] == 50
    assert "unknown job kind 'no-such-kind'" in result["bad_kind"]
    assert result["p50_ms"] <= P50_BOUND_MS
