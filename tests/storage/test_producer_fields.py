"""A file row sets only what its job kind lets a producer set: an uploaded CSV with ``bcc``,
``from`` or ``headers`` columns adds no recipient and changes no sender; the rule sets those."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from consumer.config.import_options import ImportOptions
from consumer.jobs.bulk import JobTemplate
from consumer.jobs.store import JobStore
from consumer.storage.local_import import enqueue_file
from consumer.storage.validate import row_payload
from tests.storage.conftest import IMPORT_RULE, Harness

HOSTILE_CSV = (
    b"to,subject,text,from,cc,bcc,reply_to,headers\n"
    b"reader@example.com,Hi,Hello,ceo@example.com,x@attacker.example,spy@attacker.example,"
    b'spy@attacker.example,"{""Bcc"": ""spy@attacker.example""}"\n'
)
SAFE = {"to": "reader@example.com", "subject": "Hi", "text": "Hello"}


def payloads(harness: Harness) -> list[Any]:
    return [json.loads(row["payload"]) if isinstance(row["payload"], str) else row["payload"]
            for row in harness.jobs()]  # fmt: skip


def test_an_uploaded_csv_cannot_add_recipients_or_change_the_sender(harness: Harness) -> None:
    harness.process("hostile.csv", HOSTILE_CSV)
    assert payloads(harness) == [SAFE]


def test_the_rule_sets_the_sender_and_the_hidden_recipients(harness: Harness) -> None:
    fixed = {"from": "news@acme.example", "bcc": ["archive@acme.example"]}
    rule = {**IMPORT_RULE, "bucket": harness.bucket,
            "options": {"set_fields": fixed}}  # fmt: skip
    harness.with_rules([rule]).process("hostile.csv", HOSTILE_CSV)
    assert payloads(harness) == [{**SAFE, **fixed}]


def test_a_rule_may_name_the_fields_a_row_keeps() -> None:
    options = ImportOptions.parse({"fields": ["to", "name"]})
    payload, problem = row_payload({"to": "a@example.com", "name": "A", "bcc": "b@x.io"}, options)
    assert (json.loads(payload), problem) == ({"to": "a@example.com", "name": "A"}, "")


def test_a_local_file_is_filtered_the_same_way(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "hostile.csv"
    path.write_bytes(HOSTILE_CSV)
    report = enqueue_file(engine, JobTemplate("email"), path, "csv", "p")
    assert report.created == 1
    [job] = JobStore(engine).list()
    assert job.payload == SAFE
