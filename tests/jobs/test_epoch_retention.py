"""PostgreSQL's jobs retention by epoch (``consumer.jobs.epochs``, ``consumer.jobs.epoch_retire``,
the ``cleanup`` task): the switch when due, an epoch whose jobs all finished before the cutoff
dropped whole, an epoch that unfinished jobs hold past the cutoff chunk-deleted, one that ended
since never, and a lock not granted left for the next run. Epochs are made by switching at once
(``switch`` with a clock weeks ahead); ``job_epochs.ended_at`` is then set to the history a
test needs."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, text, update

from consumer.config.settings import Settings
from consumer.jobs import epoch_queries, epoch_retire, epochs
from consumer.jobs import store as jobs_store
from consumer.jobs.cleanup import cleanup
from consumer.jobs.epoch_retire import retire
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import tick_body
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every
from tests.conftest import Clock

pytestmark = pytest.mark.postgres

DAY, HOUR = timedelta(days=1), timedelta(hours=1)
LENGTH = RETENTION = timedelta(days=7)
FAR = timedelta(days=400)


def job(
    engine: Engine,
    key: str,
    status: str = "pending",
    finished_at: datetime | None = None,
    due: bool = False,
) -> int:
    """A job of kind ``key`` in the current epoch; a pending one runs in ``FAR`` unless ``due``."""
    run_at = datetime.now(UTC) + (timedelta() if due else FAR)
    job_id = jobs_store.enqueue(engine, key, {}, key=key, run_at=run_at, allow_unknown=True).job_id
    assert job_id is not None
    if status != "pending":
        values = {"status": status, "finished_at": finished_at, "run_at": datetime.now(UTC)}
        with engine.begin() as connection:
            connection.execute(update(jobs).where(jobs.c.id == job_id).values(**values))
    return job_id


def next_epoch(engine: Engine) -> int:
    """The next epoch made current now."""
    assert epochs.make_next(engine) is not None
    switched = epochs.switch(engine, datetime.now(UTC) + FAR, LENGTH)
    assert switched is not None
    return switched


def started(engine: Engine) -> datetime:
    with engine.connect() as connection:
        return epochs.current(connection).started_at


def ended(engine: Engine, epoch: int, at: datetime) -> None:
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE job_epochs SET ended_at = :at WHERE epoch = :epoch"),
            {"at": at, "epoch": epoch},
        )


def epoch_of(engine: Engine, key: str) -> int | None:
    with engine.connect() as connection:
        found = connection.execute(
            select(text("epoch")).select_from(jobs).where(jobs.c.idempotency_key == key)
        )
        return found.scalar()


def partition_names(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        found = connection.execute(
            text("SELECT relname FROM pg_class WHERE relname ~ '^jobs_e[0-9]+'")
        )
        return {name for name in found.scalars() if "_e" in name and name.count("_") == 1}


def test_the_switch_happens_only_when_due_and_the_jobs_keep_working(pg_engine: Engine) -> None:
    engine, store = pg_engine, JobStore(pg_engine)
    waiting = job(engine, "waiting")
    job(engine, "working", due=True)
    start = datetime.now(UTC)
    [claimed] = store.claim("t", 1, ["working"], start, start + HOUR)
    assert epochs.make_next(engine) == "jobs_e1"
    assert epochs.switch(engine, started(engine) + LENGTH - timedelta(seconds=1), LENGTH) is None
    assert epochs.switch(engine, started(engine) + LENGTH, LENGTH) == 1
    assert epochs.switch(engine, started(engine) + LENGTH, LENGTH) is None  # jobs_e2 not made

    assert store.complete("t", datetime.now(UTC), done=[claimed.id]).done == 1
    job(engine, "later")
    assert (epoch_of(engine, "waiting"), epoch_of(engine, "later")) == (0, 1)
    due = datetime.now(UTC) + 2 * FAR
    assert [found.id for found in store.claim("u", 5, ["waiting"], due, due + HOUR)] == [waiting]


def test_retire_drops_only_an_epoch_whose_jobs_all_finished_before_the_cutoff(
    pg_engine: Engine,
) -> None:
    engine = pg_engine
    cutoff = datetime.now(UTC) - RETENTION
    job(engine, "e0-done", "done", cutoff - 2 * DAY)
    job(engine, "e0-dead", "dead", cutoff - DAY)
    next_epoch(engine)
    job(engine, "e1-done", "done", cutoff - 2 * DAY)
    job(engine, "e1-recent", "cancelled", cutoff + HOUR)
    next_epoch(engine)
    job(engine, "e2-done", "done", cutoff - 2 * DAY)
    job(engine, "e2-pending")
    next_epoch(engine)
    job(engine, "e3-done", "done", cutoff - 2 * DAY)
    job(engine, "e3-running", due=True)
    now = datetime.now(UTC)
    assert len(JobStore(engine).claim("t", 1, ["e3-running"], now, now + FAR)) == 1
    next_epoch(engine)
    job(engine, "e4-done", "done", cutoff - 2 * DAY)  # the current epoch's

    retired = retire(engine, cutoff)

    assert (retired.dropped, retired.rows) == (["jobs_e0"], 2), retired
    assert (retired.skipped, retired.stuck, retired.more) == ({}, [], False)  # none ended by then
    assert partition_names(engine) == {f"jobs_e{n}" for n in range(1, 5)}
    assert not {name for name in _all_tables(engine) if name.endswith("_retired")}
    assert epoch_of(engine, "e0-done") is None
    assert [epoch_of(engine, f"e{n}-done") for n in range(1, 5)] == [1, 2, 3, 4]

    for epoch in (1, 2, 3):  # as if they had ended before the cutoff: due, and said why not
        ended(engine, epoch, cutoff - HOUR)
    again = retire(engine, cutoff)
    assert again.dropped == [] and again.stuck == [1, 2, 3], again
    assert again.skipped == {
        "jobs_e1": "holds 1 job(s) finished since the cutoff",
        "jobs_e2": "holds 1 unfinished job(s)",
        "jobs_e3": "holds 1 unfinished job(s)",
    }


def _all_tables(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        return list(connection.execute(text("SELECT relname FROM pg_class")).scalars())


def test_the_checks_read_indexes_only(pg_engine: Engine) -> None:
    """No probe of what retention keeps scans a partition or filters its rows, which under the
    jobs' lock would stop every writer for the scan's length: each reads a partial index (pending,
    running) or an index's range (finished since the cutoff)."""
    literal = f"'{datetime.now(UTC).isoformat()}'::timestamptz"
    with pg_engine.begin() as connection:
        connection.execute(text("SET LOCAL enable_seqscan = off"))
        for probe in epoch_queries._kept("jobs_e0", literal):
            plan = "\n".join(connection.execute(text(f"EXPLAIN {probe}")).scalars())
            assert "Index" in plan and "Seq Scan" not in plan and "Filter" not in plan, plan


def test_a_job_revived_after_the_survey_keeps_its_epoch(
    pg_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check under the jobs' lock is the last word: an operator's retry committed between the
    survey (which found every job finished long ago) and the locked step keeps the epoch."""
    engine, now = pg_engine, datetime.now(UTC)
    dead = job(engine, "dead", "dead", now - RETENTION - DAY)
    next_epoch(engine)
    ended(engine, 0, now - RETENTION - HOUR)
    surveyed = epoch_retire._survey

    def survey_then_retry(*args: object) -> tuple[int, int, int]:
        found = surveyed(*args)  # type: ignore[arg-type]
        assert found == (0, 0, 1) and JobStore(engine).retry(now, dead) == 1
        return found

    monkeypatch.setattr(epoch_retire, "_survey", survey_then_retry)
    retired = retire(engine, now - RETENTION)

    assert retired.dropped == [] and retired.skipped == {"jobs_e0": epoch_retire.REVIVED}, retired
    assert retired.stuck == [0]  # ended before the cutoff: its finished jobs go in chunks
    assert "jobs_e0" in partition_names(engine) and epoch_of(engine, "dead") == 0
    revived = JobStore(engine).get(dead)
    assert revived is not None and revived.status.value == "pending"


@pytest.fixture
def pg_settings(postgres_url: str, tmp_path: Path) -> Settings:
    settings = Settings(database_url=postgres_url, local_mode=True)
    assert settings.jobs.retention_seconds == RETENTION.total_seconds()
    return settings.with_values(maildir_path=str(tmp_path / "md"))


def run_cleanup(settings: Settings, engine: Engine, now: datetime) -> dict[str, object]:
    tick = parse_push({}, json.dumps(tick_body("cleanup", publish_time=now)).encode())
    outcome = Dispatcher(settings, engine, build_registry(settings), Clock(now)).dispatch(tick)
    assert outcome.kind.value == "done", outcome.details
    return dict(outcome.details)


def rerun(settings: Settings, engine: Engine, now: datetime) -> dict[str, Any]:
    """The task run again at ``now``, as a continuation runs it (a day's tick runs once)."""
    deadline = time.monotonic() + settings.handler_budget_seconds
    context = HandlerContext(settings, engine, "cleanup-again", 1, deadline, clock=lambda: now)
    return cleanup(context, TickEvent("cleanup", now, Every(86400), PushMessage("again", now)))


def test_the_cleanup_task_switches_drops_chunk_deletes_the_stuck_and_says_so(
    pg_engine: Engine, pg_settings: Settings
) -> None:
    """Epoch 0 all past retention: dropped. Epoch 1 ended before the cutoff, held by a pending
    job: its finished jobs past retention deleted in chunks. Epoch 2 ended at the cutoff: its
    jobs past retention wait for the whole partition. Epoch 3, current, is due: switched."""
    engine = pg_engine
    for _ in range(3):
        next_epoch(engine)
    cutoff = started(engine)  # the clock stands an epoch after epoch 3 began
    ended(engine, 0, cutoff - 20 * DAY)
    ended(engine, 1, cutoff - 10 * DAY)
    _place(engine, 0, "e0-done", "done", cutoff - 21 * DAY)
    _place(engine, 1, "e1-done", "done", cutoff - 11 * DAY)
    _place(engine, 1, "e1-pending", "pending", None)
    _place(engine, 2, "e2-done", "done", cutoff - DAY)
    _place(engine, 2, "e2-recent", "done", cutoff + HOUR)
    job(engine, "e3-waiting")

    details = run_cleanup(pg_settings, engine, cutoff + RETENTION)

    assert details["jobs_epoch"] == 4 and details["jobs_epoch_switched"] is True, details
    assert details["jobs_partitions_dropped"] == ["jobs_e0"], details
    assert details["jobs_partitions_skipped"] == {"jobs_e1": "holds 1 unfinished job(s)"}
    assert (details["jobs_purged"], details["jobs_rows_chunked"], details["more"]) == (2, 1, False)
    assert details["jobs_epoch_analyzed"] is None  # this run switched: jobs_e4 is empty
    left = {key: epoch_of(engine, key) for key in ("e1-pending", "e2-done", "e2-recent")}
    assert left == {"e1-pending": 1, "e2-done": 2, "e2-recent": 2}
    assert epoch_of(engine, "e1-done") is None and epoch_of(engine, "e3-waiting") == 3

    job(engine, "e4-first")
    again = rerun(pg_settings, engine, cutoff + RETENTION)
    assert (again["jobs_epoch_switched"], again["jobs_epoch_analyzed"]) == (False, "jobs_e4")
    assert rerun(pg_settings, engine, cutoff + RETENTION)["jobs_epoch_analyzed"] is None


def _place(engine: Engine, epoch: int, key: str, status: str, finished: datetime | None) -> None:
    """A job written straight into an earlier epoch's partition (as if enqueued then)."""
    with engine.begin() as connection:
        connection.execute(
            text(
                f"INSERT INTO jobs_e{epoch} (kind, payload, status, priority, run_at, attempts, "
                "created_at, updated_at, finished_at, idempotency_key, epoch) VALUES "
                "(:kind, '{}', :status, 0, now(), 0, now(), now(), :finished, :key, :epoch)"
            ),
            {"kind": key, "key": key, "status": status, "finished": finished, "epoch": epoch},
        )


def test_a_lock_not_granted_leaves_the_switch_and_the_retire_for_the_next_run(
    pg_engine: Engine, pg_settings: Settings
) -> None:
    """A producer's transaction held open keeps the switch (``SHARE``) and the retirement
    (``ACCESS EXCLUSIVE``) from their locks: the task gives up after its tries, says why, fails
    nothing, and the next run does it."""
    engine = pg_engine
    _place(engine, 0, "e0-done", "done", datetime.now(UTC) - 30 * DAY)
    next_epoch(engine)
    ended(engine, 0, datetime.now(UTC) - 20 * DAY)
    assert epochs.make_next(engine) == "jobs_e2"
    now = started(engine) + LENGTH
    with engine.connect() as producer:
        producer.exec_driver_sql("LOCK TABLE jobs IN ROW EXCLUSIVE MODE")
        details = run_cleanup(pg_settings, engine, now)
        producer.rollback()
    assert (details["jobs_epoch"], details["jobs_epoch_switched"]) == (1, False), details
    assert details["jobs_partitions_skipped"] == {"jobs_e0": epoch_retire.LOCK_NOT_GRANTED}
    assert details["jobs_partitions_dropped"] == [] and details["jobs_purged"] == 0
    assert epoch_of(engine, "e0-done") == 0

    later = rerun(pg_settings, engine, now)
    dropped = ["jobs_e0", "jobs_e1"]  # jobs_e1, switched from and empty, goes at once
    assert (later["jobs_epoch"], later["jobs_partitions_dropped"]) == (2, dropped), later
