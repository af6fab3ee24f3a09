"""``processed_files``: one row per generation, owned by the newest run; a superseded run's
writes (and the jobs in the same transaction) are refused, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue_many
from consumer.jobs.schema import jobs
from consumer.storage.model import FileStatus, Progress, StoredObject
from consumer.storage.store import FileTakenOver, ProcessedFiles
from consumer.wire.timeutil import utcnow
from tests.conftest import Rollback

OBJ = StoredObject("b", "dir/a.csv", 1700000000000001, size=10, content_type="text/csv")


def job_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(jobs)) or 0)


def commit_batch(engine: Engine, files: ProcessedFiles, owner: str, lines: range) -> None:
    """What a processor's commit does: jobs and progress in one transaction."""
    batch = [NewJob("email", {"n": n}, key=f"{OBJ.key}:{n}") for n in lines]
    progress = Progress(rows_accepted=lines.stop - 2, resume_line=lines.stop - 1)
    with engine.begin() as connection:
        enqueue_many(connection, batch)
        files.checkpoint(connection, OBJ, owner, progress, utcnow())


def test_a_newer_run_takes_over_and_fences_the_older_one(engine: Engine) -> None:
    files = ProcessedFiles(engine)
    first = files.begin(OBJ, "import-jobs", "run-a", utcnow())
    assert (first.status, first.attempts, first.progress) == (FileStatus.RUNNING, 1, Progress())
    commit_batch(engine, files, "run-a", range(2, 12))

    second = files.begin(OBJ, "import-jobs", "run-b", utcnow())
    assert second.attempts == 2 and second.progress.resume_line == 11  # resumes, not restarts

    with pytest.raises(FileTakenOver):
        commit_batch(engine, files, "run-a", range(12, 22))
    assert job_count(engine) == 10  # run A's second batch rolled back with its checkpoint
    with pytest.raises(FileTakenOver):
        files.finish(OBJ, "run-a", FileStatus.DONE, Progress(), utcnow())

    commit_batch(engine, files, "run-b", range(12, 22))
    files.finish(OBJ, "run-b", FileStatus.DONE, Progress(rows_accepted=20), utcnow())
    assert job_count(engine) == 20

    again = files.begin(OBJ, "import-jobs", "run-c", utcnow())
    assert again.status is FileStatus.DONE and again.attempts == 2  # finished rows stay as they are


def test_skips_and_errors_are_recorded(engine: Engine) -> None:
    files = ProcessedFiles(engine)
    files.begin(OBJ, "import-jobs", "run-a", utcnow())
    files.note_error(OBJ, "run-a", "RuntimeError: boom", utcnow())
    row = files.get(OBJ.bucket, OBJ.name, OBJ.generation)
    assert (
        row is not None
        and row.status is FileStatus.RUNNING
        and row.last_error == "RuntimeError: boom"
    )

    files.record_skip(OBJ, "run-a", "deleted", utcnow())
    other = StoredObject("b", "other", 5)
    files.begin(other, "import-jobs", "run-c", utcnow())
    files.record_skip(other, "run-c", "superseded", utcnow())
    listed = {(r.name, r.status, r.last_error) for r in files.list(FileStatus.SKIPPED)}
    assert listed == {("dir/a.csv", FileStatus.SKIPPED, "deleted"),
                      ("other", FileStatus.SKIPPED, "superseded")}  # fmt: skip


def test_a_stale_run_cannot_mark_a_newer_runs_file_skipped(engine: Engine) -> None:
    files = ProcessedFiles(engine)
    files.begin(OBJ, "import-jobs", "run-a", utcnow())
    files.begin(OBJ, "import-jobs", "run-b", utcnow())
    with pytest.raises(FileTakenOver):
        files.record_skip(OBJ, "run-a", "deleted", utcnow())
    row = files.get(OBJ.bucket, OBJ.name, OBJ.generation)
    assert row is not None and row.status is FileStatus.RUNNING and row.last_error is None
    files.finish(OBJ, "run-b", FileStatus.DONE, Progress(rows_accepted=1), utcnow())
    with pytest.raises(FileTakenOver):
        files.record_skip(OBJ, "run-b", "deleted", utcnow())  # finished rows stay finished


def test_writes_given_the_callers_connection_roll_back_with_it(engine: Engine) -> None:
    files = ProcessedFiles(engine)
    with pytest.raises(Rollback), engine.begin() as connection:
        files.begin(OBJ, "import-jobs", "run-a", utcnow(), connection=connection)
        files.note_error(OBJ, "run-a", "RuntimeError: boom", utcnow(), connection=connection)
        progress = files.owned_progress(OBJ, "run-a", connection=connection)
        assert progress == Progress()  # the caller sees its own writes
        files.finish(OBJ, "run-a", FileStatus.DONE, Progress(), utcnow(), connection=connection)
        row = files.get(OBJ.bucket, OBJ.name, OBJ.generation, connection=connection)
        assert row is not None and row.status is FileStatus.DONE
        assert len(files.list(FileStatus.DONE, connection=connection)) == 1
        raise Rollback
    assert files.get(OBJ.bucket, OBJ.name, OBJ.generation) is None and files.list() == []
    files.begin(OBJ, "import-jobs", "run-b", utcnow())  # without one: committed on its own
    assert files.owned_progress(OBJ, "run-b") == Progress()


def test_a_skip_refused_on_the_callers_connection_writes_nothing(engine: Engine) -> None:
    files = ProcessedFiles(engine)
    files.begin(OBJ, "import-jobs", "run-a", utcnow())
    with pytest.raises(FileTakenOver), engine.begin() as connection:
        files.begin(OBJ, "import-jobs", "run-b", utcnow(), connection=connection)
        files.record_skip(OBJ, "run-a", "deleted", utcnow(), connection=connection)
    row = files.get(OBJ.bucket, OBJ.name, OBJ.generation)
    assert row is not None and row.attempts == 1 and row.status is FileStatus.RUNNING
    assert files.owned_progress(OBJ, "run-a") is not None  # run B's takeover rolled back
