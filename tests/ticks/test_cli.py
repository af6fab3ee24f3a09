"""``consumer tasks`` through click on a real SQLite file: list, pause with a reason, run now
(refused while paused, then once per id), resume; each action's JSON log line names its author.
``consumer status`` shows the pause."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner, Result

from consumer.cli.main import main
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox


def run(env: dict[str, str | None], *args: str) -> Result:
    return CliRunner(env=env).invoke(main, list(args))


def actions(stderr: str) -> list[dict[str, object]]:
    lines = (json.loads(line) for line in stderr.splitlines() if line.startswith("{"))
    return [line for line in lines if line["message"] == "task action"]


def test_list_pause_run_resume(sqlite_url: str) -> None:
    url = sqlite_url
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONSUMER_")}
    env |= {
        "CONSUMER_DATABASE_URL": url,
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_PLUGINS": "tests.ticks.plugin",
        "CONSUMER_LOG_FORMAT": "json",
        "CONSUMER_TICK_POLICIES": "report.catch_up=all:3",
    }
    listed = run(env, "tasks", "list").stdout.splitlines()
    report = next(line.split() for line in listed if line.startswith("report"))
    assert report == ["report", "60", "allow", "all:3", "never", "no"]
    assert next(line.split() for line in listed if line.startswith("slow"))[2] == "skip"

    paused = run(env, "tasks", "pause", "report", "--reason", "relay down", "--by", "alice")
    assert paused.exit_code == 0 and paused.stdout.strip() == "report is paused"
    assert actions(paused.stderr) == [
        {**actions(paused.stderr)[0], "who": "alice", "action": "pause", "target": "report"}
    ]
    assert "by alice: relay down" in run(env, "tasks", "list").stdout
    assert "PAUSED since" in run(env, "status").stdout

    refused = run(env, "tasks", "run", "report", "--id", "r1", "--by", "bob")
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["reason"] == "paused"

    resumed = run(env, "tasks", "resume", "report")  # no --by: the OS user
    assert resumed.exit_code == 0 and actions(resumed.stderr)[0]["who"]
    ran = run(env, "tasks", "run", "report", "--id", "r2", "--by", "bob")
    again = run(env, "tasks", "run", "report", "--id", "r2", "--by", "bob")
    assert (ran.exit_code, json.loads(ran.stdout)["outcome"]) == (0, "done")
    assert (again.exit_code, json.loads(again.stdout)["outcome"]) == (0, "duplicate")
    assert [a["who"] for a in actions(ran.stderr)] == ["bob"]
    engine = make_engine(url)
    try:
        inbox = Inbox(engine)
        row = inbox.get("tick:report:run-now:r2")
        assert row is not None and row.status is Status.DONE
        assert row.message["attributes"]["run_by"] == "bob"
        skipped = inbox.get("tick:report:run-now:r1")
        assert skipped is not None and skipped.status is Status.SKIPPED
    finally:
        engine.dispose()

    unknown = run(env, "tasks", "pause", "nope")
    assert unknown.exit_code != 0
    assert "no tick task 'nope' is registered" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
