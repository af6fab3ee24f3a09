"""``consumer files list | show | rules``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from consumer.cli.main import main
from tests.storage.conftest import Harness, email_csv


def run(harness: Harness, *args: str, exit_code: int = 0) -> str:
    env = {
        "CONSUMER_DATABASE_URL": harness.settings.database_url,
        "CONSUMER_STORAGE_RULES": harness.settings.storage.rules,
    }
    result = CliRunner(env=env).invoke(main, ["files", *args], catch_exceptions=False)
    assert result.exit_code == exit_code, result.output
    return result.output


def test_list_show_and_rules(harness: Harness) -> None:
    data = b"to\nnobody\nsomeone@example.com\n"
    generation = harness.upload("in/a.csv", data)
    harness.notify("in/a.csv", generation)
    url = f"gs://{harness.bucket}/in/a.csv#{generation}"

    listed = run(harness, "list", "--status", "partial")
    assert "partial" in listed and "1 ok      1 bad" in listed and url in listed
    shown = json.loads(run(harness, "show", url))
    assert shown["status"] == "partial" and shown["progress"]["rows_accepted"] == 1
    assert shown["progress"]["errors"] == [
        {"line": 2, "error": "'to' is not an email address: 'nobody'"}
    ]

    rules = [{"prefix": "x/", "processor": "import-jobs"}, {"processor": "nope"}]
    output = run(harness.with_rules(rules), "rules", exit_code=1)
    assert "rules name processors that are not registered: nope" in output
    assert '1. import-jobs on OBJECT_FINALIZE {"prefix": "x/"}' in output
    assert "2. nope on OBJECT_FINALIZE {}   <- NOT REGISTERED" in output
    assert "processors: import-jobs" in output
    assert "NOT REGISTERED" not in run(harness.with_rules(rules[:1]), "rules")


def test_email_csv_helper_is_well_formed() -> None:
    assert email_csv(2).decode().splitlines() == [
        "to,subject,text", "user0@example.com,Hello 0,Line for 0",
        "user1@example.com,Hello 1,Line for 1",
    ]  # fmt: skip
