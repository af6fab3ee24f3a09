"""Imported files reach /metrics: rows accepted and rejected, and files by final status."""

from __future__ import annotations

from prometheus_client import generate_latest

from consumer.observe.metrics import process_registry
from consumer.wire.outcomes import Kind
from tests.storage.conftest import Harness, email_csv
from tests.support.metrics_text import total


def scrape() -> str:
    return generate_latest(process_registry()).decode()


def test_rows_and_files_are_counted(harness: Harness) -> None:
    before = scrape()
    assert harness.process("a.csv", email_csv(7)).kind is Kind.DONE
    partial = b'{"to": "a@example.com", "subject": "one"}\n{"subject": "no recipient"}\n'
    assert harness.process("b.jsonl", partial, "application/x-ndjson").kind is Kind.DONE
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert delta("consumer_file_rows_total", result="accepted") == 8
    assert delta("consumer_file_rows_total", result="rejected") == 1
    assert delta("consumer_files_processed_total", status="done") == 1
    assert delta("consumer_files_processed_total", status="partial") == 1
