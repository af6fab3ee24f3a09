"""Row validation and the options of ``import-jobs``."""

from __future__ import annotations

from typing import Any

import pytest

from consumer.config.import_options import ImportOptions
from consumer.errors import SettingsError
from consumer.storage.model import StoredObject
from consumer.storage.validate import row_problem

EMAIL = ImportOptions()


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"to": "a@example.com", "subject": "hi"}, ""),
        ({"to": "Ann <a@example.com>", "cc": ["b@example.com"]}, ""),
        ({"subject": "hi"}, "'to' is required"),
        ({"to": ""}, "'to' is required"),
        ({"to": "not-an-address"}, "'to' is not an email address: 'not-an-address'"),
        ({"to": "a@example.com", "cc": ["b@example.com", "x y@z.io"]}, "'cc' is not an email"),
        ({"to": "a@localhost"}, "'to' is not an email address"),
        ({"to": "a@example.com", "from": 7}, "'from' is not an email address: 7"),
        ({"to": "a@example.com", "text": "\ud800"}, "unpaired surrogate"),
        ({"to": "a@example.com", "text": "x" * 70_000}, "over the 65536-byte limit"),
    ],
)
def test_email_rows(fields: dict[str, Any], problem: str) -> None:
    found = row_problem(fields, EMAIL)
    assert problem in found if problem else found == "", found


def test_other_kinds_check_only_what_they_ask_for() -> None:
    options = ImportOptions.parse({"kind": "webhook", "required": ["url"]})
    assert row_problem({"url": "https://x"}, options) == ""
    assert row_problem({"to": "nonsense", "url": "u"}, options) == ""
    assert row_problem({}, options) == "'url' is required"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"colour": "red"}, "unknown options ['colour']"),
        ({"format": "xml"}, "'format' must be one of auto, csv, jsonl"),
        ({"batch_rows": 0}, "'batch_rows' must be a whole number in 1..10000"),
        ({"max_errors": True}, "'max_errors' must be a whole number"),
        ({"max_attempts": 0}, "'max_attempts' must be a whole number in 1..2147483647"),
        ({"required": "to"}, "'required' must be a list of field names"),
        ({"kind": ""}, "'kind' must be a job kind name"),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        ImportOptions.parse(options)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("name", "content_type", "expected"),
    [
        ("a.csv", "text/csv", "csv"),
        ("a.jsonl", "", "jsonl"),
        ("a.NDJSON", "application/octet-stream", "jsonl"),
        ("a.txt", "application/x-ndjson; charset=utf-8", "jsonl"),
        ("a", "", "csv"),
    ],
)
def test_format_detection(name: str, content_type: str, expected: str) -> None:
    obj = StoredObject("b", name, 1, content_type=content_type)
    assert ImportOptions().format_for(obj) == expected
    assert ImportOptions(format="csv").format_for(obj) == "csv"


@pytest.mark.timeout(10)
def test_a_huge_address_field_is_refused_by_size_before_any_pattern() -> None:
    # Spaces then one character: the old pattern's overlapping \s* made this quadratic.
    assert "over the 65536-byte limit" in row_problem({"to": " " * 200_000 + "x"}, EMAIL)


@pytest.mark.timeout(10)
def test_a_long_address_within_the_row_limit_is_refused_without_the_pattern() -> None:
    roomy = ImportOptions(max_row_bytes=1 << 20)
    problem = row_problem({"to": " " * 900_000 + "x"}, roomy)
    assert problem.startswith("'to' is not an email address"), problem
    spaced = row_problem({"to": " " * 5000 + "a@example.com" + " " * 5000}, roomy)
    assert spaced == "", spaced
