"""``consumer_enqueue(...)``, the SQL function (migration ``0010_sql_enqueue``), against real
gunicorn servers on PostgreSQL: an enqueue that rolls back leaves no job and starts nothing, one
that commits starts at once through NOTIFY/LISTEN (no tick, no Pub/Sub), the same key is the
same job, bad input is a clear SQL error that stores nothing, the kind's producer fields apply,
and the listener comes back after its connection is cut."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from consumer.db.engine import make_engine
from tests.conftest import Server
from tests.jobs import stamp_plugin

pytestmark = pytest.mark.postgres
START_WITHIN_SECONDS = 5.0
LISTENING = "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN consumer_jobs'"


@pytest.fixture
def db(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    stamp_plugin.starts_metadata.create_all(engine)
    yield engine
    engine.dispose()


def dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def server_env(url: str, tmp_path: Path) -> dict[str, str]:
    """Outside local mode (signed wake-ups, declared sources), and no tick due during a test:
    whatever starts a job here is the NOTIFY."""
    return {
        "CONSUMER_DATABASE_URL": url,
        "CONSUMER_LOCAL_MODE": "false",
        "CONSUMER_PLUGINS": "tests.jobs.stamp_plugin",
        "CONSUMER_MAILDIR_PATH": str(tmp_path / "md"),
        "CONSUMER_PUSH_TOKEN": "test-push-token-0123456789",
        "CONSUMER_LOG_LEVEL": "WARNING",
    }


def listening(engine: Engine, count: int, timeout: float = 30) -> None:
    """Until ``count`` processes LISTEN on the test's database."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if (
                connection.execute(text(LISTENING + " AND datname = current_database()")).scalar()
                >= count
            ):
                return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} processes LISTEN after {timeout} s")


@pytest.fixture
def serving(
    db: Engine, postgres_url: str, tmp_path: Path, start_server: Callable[..., Server]
) -> Engine:
    start_server(server_env(postgres_url, tmp_path), workers=1)
    listening(db, 1)
    return db


def sql_enqueue(url: str, *args: Any, commit: bool = True, **named: Any) -> int | None:
    """``consumer_enqueue`` in a transaction of its own that commits or rolls back."""
    placeholders = [f"%s::{'jsonb' if i == 1 else 'text'}" for i in range(len(args))]
    placeholders += [f"{name} => %s" for name in named]
    values = [json.dumps(a) if i == 1 else a for i, a in enumerate(args)] + list(named.values())
    with psycopg.connect(dsn(url)) as connection:
        job_id = connection.execute(
            f"SELECT consumer_enqueue({', '.join(placeholders)})", values
        ).fetchone()
        if commit:
            connection.commit()
        else:
            connection.rollback()
    return None if job_id is None else job_id[0]


def wait_started(engine: Engine, job_id: int, timeout: float = START_WITHIN_SECONDS) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job_id in (found := stamp_plugin.started(engine)):
            return found[job_id]
        time.sleep(0.01)
    raise AssertionError(f"job {job_id} did not start within {timeout} s")


def job_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM jobs")).scalar() or 0)


def test_a_rollback_leaves_no_job_and_a_commit_starts_the_job_at_once(
    serving: Engine, postgres_url: str
) -> None:
    sql_enqueue(postgres_url, "stamp", {"n": 0}, commit=False)
    job_id = sql_enqueue(postgres_url, "stamp", {"n": 1})
    committed = time.time()
    assert job_id is not None
    assert wait_started(serving, job_id) - committed < 1.0  # the 5-minute tick never came
    assert job_count(serving) == 1
    assert list(stamp_plugin.started(serving)) == [job_id]


def test_the_same_key_is_the_same_job(serving: Engine, postgres_url: str) -> None:
    first = sql_enqueue(postgres_url, "stamp", {"n": 1}, key="order-42:welcome")
    again = sql_enqueue(postgres_url, "stamp", {"n": 2}, key="order-42:welcome")
    assert first is not None and again == first
    wait_started(serving, first)
    assert job_count(serving) == 1


def test_the_kind_s_producer_fields_apply(serving: Engine, postgres_url: str) -> None:
    job_id = sql_enqueue(postgres_url, "stamp", {"n": 3, "bcc": "someone@example.com"})
    assert job_id is not None
    wait_started(serving, job_id)
    with serving.connect() as connection:
        payload = connection.execute(text("SELECT payload FROM test_job_starts")).scalar()
    assert payload == {"n": 3}


@pytest.mark.parametrize(
    ("args", "named", "message"),
    [
        (("no-such-kind", {}), {}, "unknown job kind 'no-such-kind'"),
        (("stamp", [1, 2]), {}, "the payload must be a JSON object, not array"),
        (("stamp", {"n": "x" * 70_000}), {}, "over the 65536-byte limit"),
        (("stamp", {}), {"max_attempts": 0}, "max_attempts must be at least 1"),
        (("stamp", {}), {"key": ""}, "key and lock_key must be non-empty"),
    ],
)
def test_bad_input_is_a_clear_sql_error_and_stores_nothing(
    serving: Engine, postgres_url: str, args: tuple[Any, ...], named: dict[str, Any], message: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        sql_enqueue(postgres_url, *args, **named)
    assert job_count(serving) == 0


def test_the_listener_comes_back_after_its_connection_is_cut(
    db: Engine, postgres_url: str, tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(
        server_env(postgres_url, tmp_path), workers=1, output=tmp_path / "server.log"
    )
    listening(db, 1)
    with db.connect() as connection:
        cut = connection.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query = 'LISTEN consumer_jobs' AND datname = current_database()"
            )
        ).all()
    assert cut == [(True,)]
    listening(db, 1)  # LISTENs again, within the first backoff
    job_id = sql_enqueue(postgres_url, "stamp", {"n": 4})
    assert job_id is not None
    wait_started(db, job_id)
    logged = [json.loads(line) for line in server.text().splitlines() if line.startswith("{")]
    assert any("LISTEN consumer_jobs lost" in line["message"] for line in logged), logged
    errors = [line["message"] for line in logged if line["severity"] in ("ERROR", "CRITICAL")]
    assert errors == [], "a cut is a warning and a reconnect, not the pool's failed reset"
