"""``consumer jobs ...`` and ``consumer sweep --once`` through click, on a real SQLite file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from consumer.cli.main import main
from consumer.db.engine import make_engine
from consumer.jobs.store import JobStore
from tests.jobs import kinds_plugin


@pytest.fixture
def invoke(sqlite_url: str, tmp_path: Path) -> Any:
    stray: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONSUMER_")}
    env = {
        **stray,
        "CONSUMER_DATABASE_URL": sqlite_url,
        "CONSUMER_LOCAL_MODE": "true",  # no SMTP host: mail goes to the maildir
        "CONSUMER_PLUGINS": "tests.jobs.kinds_plugin",
        "CONSUMER_MAILDIR_PATH": str(tmp_path / "maildir"),
        "CONSUMER_JOB_MAX_ATTEMPTS": "2",
        "CONSUMER_JOB_RETRY_BASE_SECONDS": "0",
    }
    engine = make_engine(sqlite_url)
    kinds_plugin.runs_metadata.create_all(engine)
    engine.dispose()

    def run(*args: str, ok: bool = True) -> Result:
        result = CliRunner(env=env).invoke(main, list(args))
        assert (result.exit_code == 0) == ok, result.output
        return result

    return run


def test_enqueue_reports_a_duplicate_key(invoke: Any) -> None:
    first = json.loads(invoke("jobs", "enqueue", "email", "--payload", "{}", "--key", "k").output)
    second = json.loads(invoke("jobs", "enqueue", "email", "--key", "k").output)
    assert first == {"outcome": "enqueued", "id": 1}
    assert second == {"outcome": "duplicate", "id": 1, "key": "k"}


def test_enqueue_refuses_a_kind_no_plugin_provides_without_unknown(invoke: Any) -> None:
    refused = invoke("jobs", "enqueue", "nobody-provides-this", ok=False)
    assert refused.exit_code == 2 and "'nobody-provides-this'" in refused.output
    assert "--unknown" in refused.output
    assert json.loads(invoke("jobs", "enqueue", "record").output)["outcome"] == "enqueued"
    forced = invoke("jobs", "enqueue", "nobody-provides-this", "--unknown").output
    assert json.loads(forced)["outcome"] == "enqueued"
    summary = json.loads(invoke("sweep", "--once").output)
    assert summary["done"] == 1 and summary["stopped"] == "unknown_kinds"
    assert summary["unknown_kinds"] == {"nobody-provides-this": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--payload", "{not json"], "not valid JSON"),
        (["--run-at", "tomorrow"], "RFC 3339"),
        (["--run-at", "2030-01-01T00:00:00"], "has no time zone"),
        (["--max-attempts", "0"], "--max-attempts"),
    ],
)
def test_enqueue_refuses_bad_input(invoke: Any, args: list[str], message: str) -> None:
    result = invoke("jobs", "enqueue", "email", *args, ok=False)
    assert result.exit_code == 2 and message in result.output


def test_sweep_once_list_retry_and_cancel(invoke: Any, tmp_path: Path) -> None:
    invoke("jobs", "enqueue", "record", "--payload", '{"fail": "permanent"}')
    invoke("jobs", "enqueue", "email", "--payload", '{"to": "a@example.com", "text": "hi"}')
    invoke("jobs", "enqueue", "record", "--run-at", "2999-01-01T00:00:00Z")
    summary = json.loads(invoke("sweep", "--once").output)
    assert (summary["task"], summary["done"], summary["dead"]) == ("sweep", 1, 1)
    assert len(list((tmp_path / "maildir" / "new").iterdir())) == 1

    dead = invoke("jobs", "list", "--status", "dead").output.splitlines()
    assert len(dead) == 1 and "Permanent: the test said so" in dead[0]
    shown = json.loads(invoke("jobs", "show", "1").output)
    assert shown["status"] == "dead" and shown["errors"][0]["attempt"] == 1
    assert json.loads(invoke("jobs", "retry", "1").output)["count"] == 1
    assert "pending" in invoke("jobs", "list", "--kind", "record").output
    assert invoke("jobs", "retry", "1", ok=False).exit_code == 1  # no longer dead

    assert json.loads(invoke("jobs", "cancel", "3").output)["outcome"] == "cancelled"
    assert "already finished" in invoke("jobs", "cancel", "3", ok=False).output
    assert invoke("jobs", "retry", "--dead").exit_code == 0
    assert "give a job ID or --dead" in invoke("jobs", "retry", ok=False).output
    assert "give a job ID or --dead" in invoke("jobs", "retry", "1", "--dead", ok=False).output
    assert "no job 99" in invoke("jobs", "show", "99", ok=False).output


def test_sweep_needs_once_and_honours_a_budget(invoke: Any, sqlite_url: str) -> None:
    assert "use --once" in invoke("sweep", ok=False).output
    invoke("jobs", "enqueue", "record")
    summary = json.loads(invoke("sweep", "--once", "--budget", "0").output)
    assert (summary["claimed"], summary["stopped"], summary["still_due"]) == (0, "budget", 1)
    engine = make_engine(sqlite_url)
    job = JobStore(engine).get(1)
    engine.dispose()
    assert job is not None and job.status == "pending"
