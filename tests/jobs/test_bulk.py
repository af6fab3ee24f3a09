"""The bulk insert behind file imports and ``jobs enqueue --from``: COPY-staged on PostgreSQL,
one prepared insert on SQLite; duplicate keys skipped, the caller's transaction joined."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, select

from bench.support.cuts import Cutter, on_statement, sql
from bench.support.tcpproxy import TcpProxy
from consumer import InvalidJob
from consumer.cli.main import main
from consumer.db.engine import make_engine
from consumer.errors import Unavailable
from consumer.jobs.bulk import JobTemplate, insert_jobs
from consumer.jobs.schema import jobs


def stored(engine: Engine) -> list[tuple[str, Any, str, int, int | None]]:
    query = select(jobs.c.idempotency_key, jobs.c.payload, jobs.c.status, jobs.c.priority,
                   jobs.c.max_attempts).order_by(jobs.c.id)  # fmt: skip
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(query)]  # type: ignore[misc]


def test_rows_become_pending_jobs_and_known_keys_are_skipped(engine: Engine) -> None:
    template = JobTemplate("email", priority=5, max_attempts=3)
    first = [("k:1", '{"to": "a@x.io"}'), ("k:2", '{"n": [1, "é", null]}'), ("k:1", "{}")]
    with engine.begin() as connection:
        assert insert_jobs(connection, template, first) == 2  # the repeat in the batch skipped
    with engine.begin() as connection:
        assert insert_jobs(connection, template, [("k:2", "{}"), ("k:3", "{}")]) == 1
    assert stored(engine) == [
        ("k:1", {"to": "a@x.io"}, "pending", 5, 3),
        ("k:2", {"n": [1, "é", None]}, "pending", 5, 3),
        ("k:3", {}, "pending", 5, 3),
    ]


def test_keys_and_payloads_that_need_escaping_are_stored_exactly(engine: Engine) -> None:
    """COPY's text format gives backslash, tab, newline and CR a meaning: they are escaped."""
    payload = json.dumps({"path": "C:\\dir\\n", "text": "tab\there\nnext", "q": '"\\N"'})
    rows = [("a\tb\nc\rd\\e\\N", payload), (None, "{}"), (None, "[]"), ("\\N", "null")]
    with engine.begin() as connection:
        assert insert_jobs(connection, JobTemplate("email"), rows) == 4
    assert [(key, data) for key, data, *_ in stored(engine)] == [
        ("a\tb\nc\rd\\e\\N", json.loads(payload)), (None, {}), (None, []), ("\\N", None),
    ]  # fmt: skip


def test_the_insert_joins_the_callers_transaction(engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as connection:
        assert insert_jobs(connection, JobTemplate("email"), [("gone", "{}")]) == 1
        raise RuntimeError("roll back")
    assert stored(engine) == []
    with engine.begin() as connection:  # the stage of a rolled-back transaction is gone too
        assert insert_jobs(connection, JobTemplate("email"), [("kept", "{}")]) == 1
    assert [key for key, *_ in stored(engine)] == ["kept"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"priority": 1 << 31}, "priority must be -2147483648..2147483647"),
        ({"max_attempts": 1 << 31}, "max_attempts must be 1..2147483647"),
        ({"max_attempts": 0}, "max_attempts must be 1..2147483647"),
        ({"kind": ""}, "kind must be"),
    ],
)
def test_a_template_out_of_range_is_refused_before_any_sql(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidJob, match=message):
        JobTemplate(**{"kind": "email", **changes})


@pytest.mark.postgres
def test_concurrent_bulk_inserts_of_the_same_keys_create_each_job_once(
    postgres_url: str,
) -> None:
    from consumer.db.engine import make_engine

    engine = make_engine(postgres_url, pool_size=6)
    rows = [(f"same:{n}", json.dumps({"n": n})) for n in range(3000)]

    def insert(offset: int) -> int:
        total = 0
        for start in range(offset, offset + 3000, 500):  # each worker in its own order
            batch = [rows[(n) % 3000] for n in range(start, start + 500)]
            with engine.begin() as connection:
                total += insert_jobs(connection, JobTemplate("email"), batch)
        return total

    with ThreadPoolExecutor(6) as pool:
        inserted = list(pool.map(insert, [0, 500, 1000, 1500, 2000, 2500]))
    assert sum(inserted) == 3000
    keys = [key for key, *_ in stored(engine)]
    assert len(keys) == len(set(keys)) == 3000
    engine.dispose()


# --- consumer jobs enqueue KIND --from FILE ------------------------------------------------------


@pytest.fixture
def invoke(sqlite_url: str) -> Any:
    stray: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONSUMER_")}
    env = {**stray, "CONSUMER_DATABASE_URL": sqlite_url}

    def run(*args: str, status: int = 0) -> Result:
        result = CliRunner(env=env).invoke(main, list(args))
        assert result.exit_code == status, result.output
        return result

    return run


def test_enqueue_from_a_json_lines_file_reports_rows_by_line(
    invoke: Any, tmp_path: Path, sqlite_url: str
) -> None:
    source = tmp_path / "mail.jsonl"
    source.write_text(
        '{"to": "a@example.com", "subject": "one"}\n'
        "\n"
        '{"to": "not an address"}\n'
        '{"to": "b@example.com"}\n'
        "{broken\n"
        '{"to": "c@example.com"}\n'
    )
    first = json.loads(invoke("jobs", "enqueue", "email", "--from", str(source), status=1).output)
    assert {k: first[k] for k in ("rows", "created", "duplicates", "rejected")} == {
        "rows": 5, "created": 3, "duplicates": 0, "rejected": 2,
    }  # fmt: skip
    assert [error["line"] for error in first["errors"]] == [3, 5]
    assert "'to' is not an email address" in first["errors"][0]["error"]
    assert first["errors"][1]["error"].startswith("invalid JSON")

    again = json.loads(invoke("jobs", "enqueue", "email", "--from", str(source), status=1).output)
    assert (again["created"], again["duplicates"]) == (0, 3)  # same file, same keys
    from consumer.db.engine import make_engine

    engine = make_engine(sqlite_url)
    prefix = first["key_prefix"]
    assert [key for key, *_ in stored(engine)] == [f"{prefix}:{n}" for n in (1, 4, 6)]
    engine.dispose()


def test_enqueue_from_a_csv_file_with_a_key_prefix(invoke: Any, tmp_path: Path) -> None:
    source = tmp_path / "hooks.csv"
    source.write_text("url,method\nhttps://a.example/x,POST\nhttps://b.example/y,GET\n")
    args = ["jobs", "enqueue", "webhook", "--from", str(source), "--key-prefix", "run-7",
            "--priority", "3"]  # fmt: skip
    report = json.loads(invoke(*args).output)
    assert (report["created"], report["rejected"], report["key_prefix"]) == (2, 0, "run-7")
    listed = invoke("jobs", "list").output
    assert listed.count("webhook") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--payload", '{"a": 1}'], "not with --payload or --key"),
        (["--priority", str(1 << 40)], "priority must be -2147483648..2147483647"),
        (["--format", "csv"], "cannot read the CSV file: the file is empty"),
    ],
)
def test_enqueue_from_refuses_bad_usage_clearly(
    invoke: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    source = tmp_path / "empty.csv"
    source.write_text("")
    result = invoke("jobs", "enqueue", "email", "--from", str(source), *args, status=2)
    assert message in result.output


@pytest.mark.postgres
def test_a_cut_during_the_copy_is_an_outage_and_inserts_nothing(postgres_url: str) -> None:
    """The COPY runs on the driver's cursor: a connection cut there is ``Unavailable`` (a 503,
    redelivered) like a cut of any other statement, and the transaction leaves no job."""
    proxy = TcpProxy(5432)
    proxy.start()
    cutter = Cutter(proxy, 0.5)
    proxy.watch = on_statement(cutter, sql(b"COPY jobs_stage"), 1)
    proxied = make_engine(postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}"))
    direct = make_engine(postgres_url)
    try:
        with pytest.raises(Unavailable), proxied.begin() as connection:
            insert_jobs(connection, JobTemplate("email"), [("k:1", "{}"), ("k:2", "{}")])
        assert cutter.made and stored(direct) == []
        cutter.ended.wait(5)
        with proxied.begin() as connection:  # the dead connection was replaced
            assert insert_jobs(connection, JobTemplate("email"), [("k:1", "{}")]) == 1
    finally:
        proxied.dispose()
        direct.dispose()
        proxy.stop()
