"""Flow control's ways in: a lock key set by the Python API, the CLI and the jobs topic; caps and
rates declared by a kind, an HTTP target and the settings (in that order of precedence), each
mistake one line; ``consumer jobs limits`` and ``consumer jobs limit`` through click."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine

from consumer import enqueue
from consumer.cli.main import main
from consumer.config.flow import JobLimit, Rate
from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.jobs.limits import configured
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import compose
from tests.jobs.test_topic import job_message

URL = "http://calls.internal/jobs"


def call_target(**limits: Any) -> dict[str, Any]:
    return {"name": "calls", "url": URL, "serves": {"job_kind": "call"},
            "auth": {"type": "none"}, **limits}  # fmt: skip


def test_the_python_api_and_the_jobs_topic_set_the_lock_key(
    engine: Engine, settings: Settings
) -> None:
    enqueue(engine, "email", {}, lock_key="account-1")
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    dispatcher.dispatch(job_message("m1", {}, job_lock_key="account-2"))
    assert sorted(job.lock_key or "" for job in JobStore(engine).list()) == [
        "account-1", "topic:account-2"
    ]  # fmt: skip


def test_declared_then_target_then_settings_limits() -> None:
    registry = Registry()
    registry.job_kind("report", cap=1)(lambda context, job: None)
    registry.job_limit("export", rate="10/1m")
    target = {k: v for k, v in call_target(cap=4, rate="50/1s").items() if k != "name"}
    registry.http_target("calls", **target)
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_JOB_LIMITS": "call=cap:2, report=cap:none"}
    limits = configured(registry, Settings.from_env(env))
    assert limits == {"export": JobLimit(rate=Rate(10, 60.0)), "call": JobLimit(2, Rate(50, 1.0))}


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"cap": -1}, "cap must be a whole number 0..100000"),
        ({"rate": "fast"}, "rate must be N/INTERVAL such as 50/1s"),
        ({"rate": "0/1s"}, "a rate's count must be 1..100000"),
    ],
)
def test_a_bad_target_limit_is_one_line_naming_the_target(
    limits: dict[str, Any], message: str
) -> None:
    env = {
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_HTTP_TARGETS": json.dumps([call_target(**limits)]),
    }
    with pytest.raises(SettingsError) as caught:
        compose(env)
    assert "target 'calls'" in str(caught.value) and message in str(caught.value)


def test_a_cap_on_a_target_that_serves_no_job_kind_is_refused() -> None:
    tick = {**call_target(cap=1), "serves": {"tick": "t", "period_seconds": 60}}
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_HTTP_TARGETS": json.dumps([tick])}
    with pytest.raises(SettingsError, match="cap and rate apply to a job_kind target only"):
        compose(env)


def test_a_bad_declared_limit_names_the_kind() -> None:
    with pytest.raises(SettingsError, match="job kind 'report': cap must be"):
        Registry().job_kind("report", cap="many")


@pytest.fixture
def invoke(sqlite_url: str, tmp_path: Path) -> Any:
    stray: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONSUMER_")}
    env = {**stray, "CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_JOB_LIMITS": "email=cap:3"}  # fmt: skip

    def run(*args: str, ok: bool = True) -> Result:
        result = CliRunner(env=env).invoke(main, list(args))
        assert (result.exit_code == 0) == ok, result.output
        return result

    return run


def limits_shown(invoke: Any) -> dict[str, Any]:
    lines = [json.loads(line) for line in invoke("jobs", "limits").output.splitlines()]
    return {line["kind"]: line for line in lines}


def test_the_cli_shows_changes_and_resets_a_kinds_limits_and_logs_who(
    invoke: Any, caplog: pytest.LogCaptureFixture
) -> None:
    assert limits_shown(invoke)["email"]["cap"] == 3
    with caplog.at_level(logging.WARNING, logger="consumer.jobs.flow"):
        changed = json.loads(invoke("jobs", "limit", "email", "--cap", "1", "--by", "ana").output)
    assert changed == {"outcome": "changed", "kind": "email", "limits": "cap:1", "by": "ana"}
    assert [(r.kind, r.by) for r in caplog.records] == [("email", "ana")]  # type: ignore[attr-defined]
    invoke("jobs", "limit", "email", "--rate", "5/1s")
    shown = limits_shown(invoke)["email"]
    assert (shown["cap"], shown["rate"], shown["configured"]["cap"]) == (1, "5/1s", 3)
    assert shown["updated_by"]  # the OS user, without --by
    invoke("jobs", "limit", "email", "--reset")
    assert limits_shown(invoke)["email"]["cap"] == 3


def test_the_cli_refuses_a_bad_change_in_one_line(invoke: Any) -> None:
    result = invoke("jobs", "limit", "email", "--rate", "lots", ok=False)
    assert "rate must be N/INTERVAL" in result.output
    smuggled = invoke("jobs", "limit", "email", "--cap", "4;rate:1/1s", ok=False).output
    assert "cap must be a whole number, got '4;rate:1/1s'" in smuggled
    assert "give --cap, --rate, --group-cap and/or --group-rate, or --reset" in (
        invoke("jobs", "limit", "email", ok=False).output
    )
    bad_group = invoke("jobs", "limit", "email", "--group-cap", "x", ok=False).output
    assert "group_cap: cap must be a whole number, got 'x'" in bad_group
    typo = invoke("jobs", "limit", "emial", "--cap", "1", ok=False).output
    assert "no job kind 'emial' is registered, limited or changed" in typo
    assert "emial" not in limits_shown(invoke)


def test_the_cli_enqueues_with_a_lock_key(invoke: Any, sqlite_url: str) -> None:
    invoke("jobs", "enqueue", "email", "--lock-key", "account-1")
    shown = json.loads(invoke("jobs", "show", "1").output)
    assert shown["lock_key"] == "account-1"


def test_the_cli_enqueues_with_a_group_and_sets_a_group_cap(invoke: Any) -> None:
    invoke("jobs", "enqueue", "email", "--group", "tenant-1")
    assert json.loads(invoke("jobs", "show", "1").output)["group_key"] == "tenant-1"
    changed = json.loads(invoke("jobs", "limit", "email", "--group-cap", "2").output)
    assert changed["limits"] == "group_cap:2"
    shown = limits_shown(invoke)["email"]
    assert (shown["group_cap"], shown["cap"]) == (2, 3)
    assert shown["groups"] == [{"group": "tenant-1", "running": 0, "pending": 1}]
