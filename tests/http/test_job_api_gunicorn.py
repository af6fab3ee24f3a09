"""The job API through real gunicorn servers (the asyncio worker and the bridge) on PostgreSQL: a
job enqueued over HTTP starts at once (its enqueue NOTIFYs; no tick, no wake topic) and reads
``done``; the same key sent at once over HTTP from many threads and through the SQL function is
one job; an oversized body is refused before it is read."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from tests.conftest import Server
from tests.http.job_api_client import SECRET, http_call, path_of
from tests.jobs.test_sql_enqueue import (  # noqa: F401 (fixture)
    db,
    listening,
    server_env,
    sql_enqueue,
    wait_started,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def base(
    db: Engine,  # noqa: F811
    postgres_url: str,
    tmp_path: Path,
    start_server: Callable[..., Server],
) -> str:
    env = {**server_env(postgres_url, tmp_path), "CONSUMER_JOB_API_SECRETS": SECRET}
    server = start_server(env, workers=2)
    listening(db, 2)
    return f"http://127.0.0.1:{server.port}"


def jobs_with_key(engine: Engine, key: str) -> int:
    with engine.connect() as connection:
        query = text("SELECT count(*) FROM jobs WHERE idempotency_key = :k")
        return int(connection.execute(query, {"k": key}).scalar_one())


def test_a_job_enqueued_over_http_starts_at_once_and_reads_done(base: str, db: Engine) -> None:  # noqa: F811
    for n in range(3):
        status, answer = http_call(base, "POST", "/jobs", {"kind": "stamp", "payload": {"n": n},
                                                           "key": f"http-{n}"})  # fmt: skip
        committed = time.time()
        assert status == 201, answer
        assert wait_started(db, answer["job"]["id"]) - committed < 1.0
    deadline = time.monotonic() + 10
    while (read := http_call(base, "GET", path_of("http-2")))[1]["job"]["status"] != "done":
        assert time.monotonic() < deadline, read
        time.sleep(0.05)
    assert read[1]["job"]["finished_at"] is not None and read[1]["job"]["attempts"] == 1


def test_one_key_sent_at_once_over_http_and_sql_is_one_job(
    base: str,
    db: Engine,  # noqa: F811
    postgres_url: str,
) -> None:
    for round_ in range(5):
        key = f"race-{round_}"
        body = {"kind": "stamp", "payload": {"n": round_}, "key": key}
        with ThreadPoolExecutor(12) as pool:
            over_http = [pool.submit(http_call, base, "POST", "/jobs", body) for _ in range(10)]
            in_sql = [pool.submit(sql_enqueue, postgres_url, "stamp", {"n": -1}, key=key)
                      for _ in range(2)]  # fmt: skip
            answers = [future.result() for future in over_http]
            sql_ids = {future.result() for future in in_sql}
        ids = {answer["job"]["id"] for _, answer in answers} | sql_ids
        statuses = sorted(status for status, _ in answers)
        assert len(ids) == 1, answers
        assert statuses.count(201) <= 1 and set(statuses) <= {200, 201}, statuses
        assert jobs_with_key(db, key) == 1


def test_a_body_declared_over_the_limit_is_refused_unread(base: str, db: Engine) -> None:  # noqa: F811
    """64 KiB of payload plus 64 KiB for the rest: a larger declared body is a 413 at once."""
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n"
                     b"X-Consumer-Timestamp: 1\r\nX-Consumer-Signature: v1=00\r\n\r\n")  # fmt: skip
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413")
    status, big = http_call(
        base, "POST", "/jobs", {"kind": "stamp", "payload": {"n": "x" * 70_000}}
    )
    assert status == 413 and "over the 65536-byte limit" in big["error"]
    with db.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM jobs")).scalar_one() == 0
