"""Processor selection from configuration: first match wins, every condition optional."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consumer.config.settings import Settings
from consumer.config.storage_rules import Rules, load_rules, problem_with
from consumer.errors import SettingsError
from consumer.wire.events import StorageEventType as T

FINALIZE = T.OBJECT_FINALIZE
RULES = [
    {"bucket": "uploads", "prefix": "jobs/", "glob": "*.csv", "processor": "import-jobs"},
    {"bucket": "uploads", "content_type": "application/x-ndjson", "processor": "import-jobs",
     "options": {"format": "jsonl"}},
    {"glob": "*.png", "content_type": "image/*", "processor": "thumbnails"},
    {"prefix": "audit/", "events": ["OBJECT_DELETE", "OBJECT_ARCHIVE"], "processor": "audit"},
]  # fmt: skip


def select(event: T, bucket: str, name: str, content_type: str = "") -> str | None:
    rule = Rules.from_json(RULES).select(event, bucket, name, content_type)
    return rule.processor if rule else None


@pytest.mark.parametrize(
    ("event", "bucket", "name", "content_type", "expected"),
    [
        (FINALIZE, "uploads", "jobs/a.csv", "text/csv", "import-jobs"),
        (FINALIZE, "uploads", "jobs/deep/a.csv", "", "import-jobs"),  # * crosses /
        (FINALIZE, "other", "jobs/a.csv", "text/csv", None),  # wrong bucket
        (FINALIZE, "uploads", "a.csv", "text/csv", None),  # wrong prefix
        (FINALIZE, "uploads", "jobs/a.txt", "text/plain", None),  # wrong glob
        (FINALIZE, "uploads", "x", "application/x-ndjson; charset=utf-8", "import-jobs"),
        (FINALIZE, "any", "p/cat.png", "IMAGE/PNG", "thumbnails"),  # media type, any case
        (FINALIZE, "any", "p/cat.png", "text/plain", None),
        (T.OBJECT_DELETE, "uploads", "jobs/a.csv", "text/csv", None),  # finalize-only rule
        (T.OBJECT_DELETE, "b", "audit/x", "", "audit"),
        (T.OBJECT_ARCHIVE, "b", "audit/x", "", "audit"),
        (FINALIZE, "b", "audit/x", "", None),
        (T.OBJECT_METADATA_UPDATE, "b", "audit/x", "", None),
    ],
)
def test_selection(event: T, bucket: str, name: str, content_type: str, expected: str) -> None:
    assert select(event, bucket, name, content_type) == expected


def test_first_match_wins() -> None:
    rules = Rules.from_json([{"processor": "first"}, {"processor": "second"}])
    chosen = rules.select(FINALIZE, "b", "n", "")
    assert chosen is not None and chosen.processor == "first"


def test_rules_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(RULES))
    assert load_rules(str(path)) == Rules.from_json(RULES)
    assert load_rules("") == Rules()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[", "not valid JSON"),
        ('{"processor": "x"}', "expected a JSON list of rules"),
        ("[1]", "rule 1: expected a JSON object"),
        ('[{"glob": "*"}]', "'processor' must name a processor"),
        ('[{"processor": "x", "color": "red"}]', "unknown keys ['color']"),
        ('[{"processor": "x", "prefix": 3}]', "'prefix' must be a string"),
        ('[{"processor": "x", "events": []}]', "'events' must be a non-empty list"),
        ('[{"processor": "x", "events": ["OBJECT_TOUCHED"]}]', "'events' may only hold"),
        ('[{"processor": "x", "options": []}]', "'options' must be a JSON object"),
        ("/nonexistent/rules.json", "cannot read rules file"),
    ],
)
def test_bad_rules_are_reported(raw: str, message: str) -> None:
    assert message in problem_with(raw)
    with pytest.raises(SettingsError, match=r"rule|JSON|file"):
        load_rules(raw)


def test_bad_rules_stop_the_service_at_start() -> None:
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_STORAGE_RULES": '[{"glob": "*"}]'}
    with pytest.raises(SettingsError, match="CONSUMER_STORAGE_RULES: rule 1"):
        Settings.from_env(env)
    env["CONSUMER_STORAGE_RULES"] = json.dumps(RULES)
    assert Settings.from_env(env).storage.rules == json.dumps(RULES)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": 2**31}, "rule 1: import-jobs: 'priority' must be a whole number in"),
        ({"priority": -(2**31) - 1}, "'priority' must be a whole number in"),
        ({"max_attempts": 2**31}, "'max_attempts' must be a whole number in 1..2147483647"),
    ],
)
def test_import_options_out_of_int32_are_a_start_up_error(
    options: dict[str, object], message: str
) -> None:
    rules = json.dumps([{"processor": "import-jobs", "options": options}])
    assert message in problem_with(rules)
    ok = json.dumps([{"processor": "import-jobs", "options": {"priority": 2**31 - 1}}])
    assert problem_with(ok) == ""
