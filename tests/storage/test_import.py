"""Files through the real dispatcher and a real fake-gcs-server, on SQLite and PostgreSQL:
the import, its idempotency, bad files, and objects that are gone before they are read."""

from __future__ import annotations

import codecs
from datetime import UTC, datetime, timedelta

import pytest

from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.jobs.bulk import JobTemplate, insert_jobs
from consumer.storage.model import FileStatus
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow
from tests.storage.conftest import Harness, email_csv

FAKE_NOW = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)


def test_a_csv_becomes_one_job_per_row(harness: Harness) -> None:
    generation = harness.upload("jobs/a.csv", email_csv(250))
    outcome = harness.notify("jobs/a.csv", generation)

    assert outcome.kind is Kind.DONE, outcome.details
    assert outcome.details["rows_accepted"] == 250 and outcome.details["jobs_created"] == 250
    jobs = harness.jobs()
    assert len(jobs) == 250
    assert jobs[0]["kind"] == "email"
    first = {"to": "user0@example.com", "subject": "Hello 0", "text": "Line for 0"}
    assert jobs[0]["payload"] == first
    prefix = f"{harness.bucket}/jobs/a.csv#{generation}"
    assert [job["idempotency_key"] for job in jobs[:2]] == [f"{prefix}:2", f"{prefix}:3"]
    row = harness.file("jobs/a.csv", generation)
    assert row.status is FileStatus.DONE
    assert (row.size, row.content_type) == (len(email_csv(250)), "text/csv")
    assert row.checksum is not None and row.checksum.startswith("crc32c:")
    assert (row.progress.rows_accepted, row.progress.rows_rejected) == (250, 0)
    assert row.progress.duration_ms >= 0 and row.finished_at is not None


@pytest.mark.clock(FAKE_NOW)
def test_an_import_records_the_services_clock_on_its_file_and_its_jobs(harness: Harness) -> None:
    generation = harness.upload("jobs/a.csv", email_csv(3))
    assert harness.notify("jobs/a.csv", generation).kind is Kind.DONE
    row = harness.file("jobs/a.csv", generation)
    assert (row.started_at, row.updated_at, row.finished_at) == (FAKE_NOW, FAKE_NOW, FAKE_NOW)
    stamps = {(job["created_at"], job["run_at"]) for job in harness.jobs()}
    assert stamps == {(FAKE_NOW, FAKE_NOW)}


def test_a_duplicate_notification_creates_nothing(harness: Harness) -> None:
    generation = harness.upload("a.csv", email_csv(120))
    assert harness.notify("a.csv", generation).kind is Kind.DONE
    # GCS may publish the same notification twice, with a new messageId: the inbox collides.
    assert harness.notify("a.csv", generation).kind is Kind.DUPLICATE
    # A redelivery after the inbox row was purged: processed_files and the job keys still hold.
    Inbox(harness.engine).purge(finished_before=utcnow() + timedelta(days=1))
    again = harness.notify("a.csv", generation)
    assert again.kind is Kind.DONE and again.details["outcome"] == "already processed"
    assert harness.job_count() == 120


def test_rows_that_are_jobs_already_are_skipped_and_the_rest_become_jobs_once(
    harness: Harness,
) -> None:
    """A batch holding a key already taken (a job enqueued with an import key, or left from a
    run whose progress was lost) falls back from the plain insert to the one that skips taken
    keys: each row is one job, the first one stored wins, and only the new ones are counted."""
    generation = harness.upload("a.csv", email_csv(250))
    prefix = f"{harness.bucket}/a.csv#{generation}"
    taken = [(f"{prefix}:{line}", '{"to": "first@example.com"}') for line in range(150, 161)]
    with harness.engine.begin() as connection:
        assert insert_jobs(connection, JobTemplate("email"), taken) == len(taken)

    outcome = harness.notify("a.csv", generation)

    assert outcome.kind is Kind.DONE, outcome.details
    assert outcome.details["rows_accepted"] == 250
    assert outcome.details["jobs_created"] == 250 - len(taken)
    jobs = {job["idempotency_key"]: job["payload"] for job in harness.jobs()}
    assert len(jobs) == harness.job_count() == 250
    assert jobs[f"{prefix}:150"] == {"to": "first@example.com"}
    assert jobs[f"{prefix}:161"]["to"] == "user159@example.com"


def test_a_new_generation_is_a_new_file(harness: Harness) -> None:
    first = harness.upload("a.csv", email_csv(10))
    second = harness.upload("a.csv", email_csv(10))
    assert harness.notify("a.csv", first).kind is Kind.SKIPPED  # superseded before it was read
    assert harness.notify("a.csv", second).kind is Kind.DONE
    assert harness.job_count() == 10
    assert all(key.startswith(f"{harness.bucket}/a.csv#{second}:") for key in harness.job_keys())


def test_json_lines_with_rejected_rows(harness: Harness) -> None:
    data = (
        b'{"to": "a@example.com", "subject": "one"}\n'
        b'{"to": "b@example.com", "subject": "two"\n'  # truncated
        b'{"subject": "no recipient"}\n'
        b"\n"
        b'{"to": "c@example.com", "subject": "three"}\n'
    )
    outcome = harness.process("in/batch.jsonl", data, "application/x-ndjson")
    assert outcome.kind is Kind.DONE
    assert outcome.details["status"] == "partial"
    assert (outcome.details["rows_accepted"], outcome.details["rows_rejected"]) == (2, 2)
    errors = outcome.details["errors"]
    assert [error["line"] for error in errors] == [2, 3]
    assert errors[0]["error"].startswith("invalid JSON: Expecting ',' delimiter")
    assert errors[1]["error"] == "'to' is required"
    assert [key.rsplit(":", 1)[1] for key in harness.job_keys()] == ["1", "5"]


def test_bad_files_are_recorded_and_acknowledged(harness: Harness) -> None:
    cases = {
        "empty.csv": (b"", "empty", 0, 0),
        "header-only.csv": (b"to,subject,text\n", "empty", 0, 0),
        "utf16.csv": (codecs.BOM_UTF16_LE + "to,subject\na@x.io,hi\n".encode("utf-16-le"),
                      "rejected", 0, 0),
        "latin1.csv": ("to,subject\na@example.com,Café\nb@example.com,ok\n".encode("latin-1"),
                       "partial", 1, 1),
        "garbage.bin": (bytes(range(256)) * 64, "rejected", 0, 0),
        "truncated.jsonl": (b'{"to": "a@example.com"}\n{"to": "b@exa', "partial", 1, 1),
        "garbage.jsonl": (bytes(range(1, 256)) * 64, "rejected", 0, 65),  # 64 newlines
    }  # fmt: skip
    for name, (data, status, accepted, rejected) in cases.items():
        outcome = harness.process(name, data)
        assert outcome.kind is Kind.DONE, (name, outcome.details)
        assert outcome.http_status == 200
        details = outcome.details
        assert details["status"] == status, (name, details)
        assert (details["rows_accepted"], details["rows_rejected"]) == (accepted, rejected), name
    utf16 = harness.process("x.csv", cases["utf16.csv"][0]).details
    assert "header row is unreadable" in utf16["error"]
    latin1 = harness.process("y.csv", cases["latin1.csv"][0]).details
    bad_byte = "line 2: not valid UTF-8 (byte 18 of the line)"
    assert latin1["errors"] == [{"line": 2, "error": bad_byte}]
    assert harness.job_count() == 3


def test_rejected_rows_are_capped_but_counted(harness: Harness) -> None:
    rules = [{"bucket": harness.bucket, "processor": "import-jobs", "options": {"max_errors": 5}}]
    capped = harness.with_rules(rules)
    data = b"to\n" + b"nobody\n" * 40 + b"someone@example.com\n"
    outcome = capped.process("bad.csv", data)
    assert outcome.details["rows_rejected"] == 40 and outcome.details["rows_accepted"] == 1
    row = capped.file("bad.csv", int(outcome.details["file"].rsplit("#", 1)[1]))
    assert [error["line"] for error in row.progress.errors] == [2, 3, 4, 5, 6]


def test_an_object_deleted_before_processing_is_skipped(harness: Harness) -> None:
    generation = harness.upload("gone.csv", email_csv(3))
    harness.delete("gone.csv")
    outcome = harness.notify("gone.csv", generation)
    assert outcome.kind is Kind.SKIPPED and outcome.http_status == 200
    assert "was deleted before generation" in outcome.details["reason"]
    row = harness.file("gone.csv", generation)
    assert row.status is FileStatus.SKIPPED and "deleted" in (row.last_error or "")
    key = f"storage:{harness.bucket}/gone.csv#{generation}:OBJECT_FINALIZE"
    inbox_row = Inbox(harness.engine).get(key)
    assert inbox_row is not None and inbox_row.status is Status.SKIPPED
    assert harness.job_count() == 0


def test_no_rule_means_skipped_and_deletes_are_recorded(harness: Harness) -> None:
    elsewhere = harness.with_rules([{"bucket": "another-bucket", "processor": "import-jobs"}])
    generation = elsewhere.upload("a.csv", email_csv(2))
    outcome = elsewhere.notify("a.csv", generation)
    assert outcome.kind is Kind.SKIPPED and "no storage rule matches" in outcome.details["reason"]
    deleted = harness.notify("a.csv", generation, event="OBJECT_DELETE")
    assert deleted.kind is Kind.DONE and deleted.details["recorded"] == "OBJECT_DELETE"
    assert harness.job_count() == 0


def test_a_content_type_rule_matches_a_notification_without_the_type(harness: Harness) -> None:
    # payloadFormat NONE: the event carries no content type; the object's metadata has it.
    rules = [
        {"bucket": harness.bucket, "content_type": "application/x-ndjson",
         "processor": "import-jobs", "options": {"format": "jsonl"}},
    ]  # fmt: skip
    typed = harness.with_rules(rules)
    data = b'{"to": "a@example.com"}\n{"to": "b@example.com"}\n'
    generation = typed.upload("rows.txt", data, content_type="application/x-ndjson")
    outcome = typed.notify("rows.txt", generation)
    assert outcome.kind is Kind.DONE, outcome.details
    assert outcome.details["status"] == "done" and typed.job_count() == 2
    other = typed.upload("other.txt", data, content_type="text/plain")
    assert typed.notify("other.txt", other).kind is Kind.SKIPPED
