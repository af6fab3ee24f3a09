"""Files that are mostly blank make progress: a resume point can fall inside a stretch of blank
lines, so each delivery starts where the last one stopped, and a run of newlines is read a buffer
at a time. Before, such a file spent its whole budget re-reading the same blank lines on every
delivery, committed nothing, and ended dead."""

from __future__ import annotations

import gzip

import pytest

from consumer.storage.model import FileStatus
from consumer.wire.outcomes import Kind, Outcome
from tests.storage.conftest import Harness
from tests.storage.test_reader import upload_gzip

ROW = b'{"to": "a@example.com", "subject": "hi"}\n'


def deliver_until_done(harness: Harness, name: str, generation: int) -> list[Outcome]:
    outcomes: list[Outcome] = []
    while not outcomes or outcomes[-1].kind is Kind.RETRY:
        outcomes.append(harness.notify(name, generation))
        assert len(outcomes) <= 30, [outcome.details for outcome in outcomes]
    return outcomes


def short_budget(harness: Harness, seconds: int = 2) -> Harness:
    """A budget of ``seconds``, and only two attempts for a delivery that advances nothing."""
    rule = {"bucket": harness.bucket, "processor": "import-jobs", "options": {"format": "jsonl"}}
    return harness.with_rules(
        [rule], ack_deadline_seconds=8 + seconds, safety_margin_seconds=8, max_attempts=2
    )


@pytest.mark.slow
def test_a_mostly_blank_file_completes_across_deliveries(harness: Harness) -> None:
    # Whitespace-only lines are blank to JSON Lines but no run of bare newlines: each is read
    # on its own, so two million of them outlast a two-second budget several times over.
    short = short_budget(harness)
    data = ROW + b"  \n" * 2_000_000 + ROW
    generation = short.upload("sparse.jsonl", data, content_type="application/x-ndjson")
    outcomes = deliver_until_done(short, "sparse.jsonl", generation)

    assert outcomes[-1].kind is Kind.DONE, outcomes[-1].details
    assert len(outcomes) > 2  # stopped by its budget more often than max_attempts, never dead
    assert all("time budget exhausted" in o.details["error"] for o in outcomes[:-1])
    row = short.file("sparse.jsonl", generation)
    assert row.status is FileStatus.DONE
    assert (row.progress.rows_accepted, row.progress.jobs_created) == (2, 2)
    assert short.job_keys() == [f"{short.bucket}/sparse.jsonl#{generation}:{n}" for n in
                                (1, 2_000_002)]  # fmt: skip


@pytest.mark.slow
def test_a_gzip_of_newlines_ends_empty_without_burning_its_budget(harness: Harness) -> None:
    # 256 MB of newlines: 250 KB of gzip. Read a line at a time this took minutes per attempt;
    # read a buffer at a time it takes about a second, and each attempt resumes the last.
    # Four seconds, not two: a retry resumes by inflating again from the start (no inflate
    # state is kept), and on a loaded machine that alone outlasted two seconds twice running.
    short = short_budget(harness, seconds=4)
    generation = upload_gzip(short, "blank.jsonl", gzip.compress(b"\n" * (256 << 20), 9))
    outcomes = deliver_until_done(short, "blank.jsonl", generation)

    assert outcomes[-1].kind is Kind.DONE, outcomes[-1].details
    row = short.file("blank.jsonl", generation)
    assert row.status is FileStatus.EMPTY
    assert row.progress.rows_accepted == row.progress.rows_rejected == 0
