"""The job API from Node.js: ``tests/http/job_api.js`` (real ``node``: plain ``fetch`` and
``crypto`` sign each request; ``pg`` from npm calls the SQL function in a transaction) against a
gunicorn server on PostgreSQL. A key enqueued over HTTP and through SQL is one job either way
round, a job reads ``done``, a pending job is cancelled, a dead one retried runs again, and a
wrong signature is refused and stores nothing."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.conftest import Server
from tests.http.job_api_client import SECRET
from tests.jobs.test_sql_enqueue import db, listening, server_env  # noqa: F401 (fixture)
from tests.jobs.test_sql_enqueue_node import NODE, node_modules  # noqa: F401 (fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
PROGRAM = Path(__file__).with_name("job_api.js")


def test_node_signs_with_fetch_and_crypto_and_shares_keys_with_sql(
    db: Engine,  # noqa: F811
    postgres_url: str,
    tmp_path: Path,
    node_modules: Path,  # noqa: F811
    start_server: Callable[..., Server],
) -> None:
    env = {**server_env(postgres_url, tmp_path), "CONSUMER_JOB_API_SECRETS": SECRET,
           "CONSUMER_PLUGINS": "tests.jobs.stamp_plugin,tests.http.job_api_plugin"}  # fmt: skip
    server = start_server(env, workers=2)
    listening(db, 2)
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    run_env = {**os.environ, "NODE_PATH": str(node_modules), "DATABASE_URL": url,
               "BASE_URL": f"http://127.0.0.1:{server.port}", "SECRET": SECRET}  # fmt: skip
    done = subprocess.run(
        [str(NODE), str(PROGRAM)], env=run_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["done"] == "done" and result["cancelled"] == "cancelled"
    assert "the first run of a fails-once job fails" in result["dead_error"]
    assert result["after_retry"] == "done"
    assert result["forged"] == [401, "signature does not match"]
    assert result["jobs"] == 4  # node-1, node-2, node-later, node-dead
