"""PostgreSQL's inbox retention by week partitions (``consumer.inbox.partitions``): a week whose
rows are all past retention is dropped whole, after what retention keeps of it (failed rows
retried lately, rows finished lately) is carried to the current week, where its key still finds
it; a week holding a running row with a live lease is waited for, the row never moved; a week
not yet past retention stays. Rows are placed in weeks ahead of the real clock, and the tests'
clocks stand weeks ahead too."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.inbox import partitions
from consumer.inbox.model import Status
from consumer.inbox.partitions import make_ahead, retire
from consumer.inbox.store import Inbox
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import tick_body
from consumer.wire.message import PushMessage
from tests.conftest import Clock
from tests.inbox.weeks import WEEK, monday, partition_names, place, where

pytestmark = pytest.mark.postgres

M = monday(8)
"""The oldest week of the tests' rows, ``P0``; ``P(n)`` is ``M + n`` weeks."""
NOW = M + 4 * WEEK + timedelta(days=2)
"""Wednesday of week 4: at a 7-day retention, weeks 0-2 end before the cutoff, week 3 after."""
RETENTION = timedelta(days=7)
CUTOFF = NOW - RETENTION
DAY = timedelta(days=1)
LONG_LEASE = timedelta(days=60)


def week(n: int) -> str:
    return f"inbox_w{M + n * WEEK:%Y%m%d}"


def message(key: str) -> PushMessage:
    return PushMessage(message_id=key, publish_time=NOW, data=b"{}")


@pytest.fixture
def weeks(pg_engine: Engine) -> Engine:
    """The inbox with weeks 0-5 made, as the cleanup task made them on its earlier runs."""
    made = make_ahead(pg_engine, M, weeks=5)
    assert made.made == [week(n) for n in range(6)], made
    return pg_engine


def test_old_weeks_are_dropped_what_retention_keeps_is_carried_and_running_rows_waited_for(
    weeks: Engine,
) -> None:
    engine, inbox = weeks, Inbox(weeks)
    place(engine, "old-done", Status.DONE, M, at=M + DAY)
    place(engine, "old-lapsed", Status.RUNNING, M, at=M + DAY, lease_until=M + DAY)
    place(engine, "failed-lately", Status.FAILED, M, updated_at=CUTOFF + timedelta(hours=1))
    late = CUTOFF + timedelta(hours=2)
    place(engine, "done-lately", Status.DONE, M, updated_at=late, finished_at=late)
    live = inbox.claim("live", "job", message("live"), M + WEEK + DAY, LONG_LEASE)
    assert live is not None and live.stored_in == week(1)
    place(engine, "p1-done", Status.DONE, M + WEEK, at=M + WEEK + DAY)
    place(engine, "p1-failed", Status.FAILED, M + WEEK, updated_at=CUTOFF + DAY)
    place(engine, "p2-done", Status.DONE, M + 2 * WEEK, at=M + 2 * WEEK + DAY)
    place(engine, "p3-done", Status.DONE, M + 3 * WEEK, at=M + 3 * WEEK + DAY)

    retired = retire(engine, CUTOFF, NOW)

    assert week(0) in retired.dropped and week(2) in retired.dropped, retired
    assert week(1) not in retired.dropped and week(3) not in retired.dropped, retired
    assert retired.skipped == {
        week(1): "waits for 1 running row(s) whose lease is not past the cutoff"
    }
    assert (retired.rows, retired.carried) == (3, 3)  # old-done, old-lapsed, p2-done dropped
    names = partition_names(engine)
    assert week(0) not in names and week(2) not in names and week(1) in names
    assert not [name for name in names if name.endswith("_retired")]
    for key in ("old-done", "old-lapsed", "p2-done"):
        assert inbox.get(key) is None, key
    carried = (("failed-lately", "failed"), ("done-lately", "done"), ("p1-failed", "failed"))
    for key, status in carried:
        assert where(engine, key) == [(week(4), M + 4 * WEEK, status)], key
        assert inbox.get(key) is not None
    assert where(engine, "live") == [(week(1), M + WEEK, "running")]  # its neighbour moved, not it
    assert where(engine, "p1-done")[0][0] == week(1) and where(engine, "p3-done")[0][0] == week(3)

    redelivered = inbox.claim("failed-lately", "job", message("again"), NOW, LONG_LEASE)
    assert redelivered is not None and redelivered.attempts == 2
    assert inbox.finish(redelivered, Status.DONE, NOW)
    assert inbox.claim("done-lately", "job", message("again"), NOW, LONG_LEASE) is None

    # The running row finishes where it was placed; the next run carries it and drops week 1.
    assert inbox.finish(live, Status.DONE, NOW)
    again = retire(engine, CUTOFF, NOW)
    assert (again.dropped, again.rows, again.carried, again.skipped) == ([week(1)], 1, 1, {})
    assert where(engine, "live") == [(week(4), M + 4 * WEEK, "done")]


def test_the_default_partition_is_emptied_of_what_retention_keeps_dropped_and_made_again(
    weeks: Engine,
) -> None:
    """Rows placed in a week no partition was made for land in ``inbox_default``; that week
    cannot be made while they are there. Retirement carries out what retention keeps, drops
    the default with the rest and makes it again, empty; then the week can be made."""
    engine = weeks
    gap = M - 2 * WEEK  # between the migration's weeks and the tests' own
    place(engine, "gap-done", Status.DONE, gap, at=gap + DAY)
    place(engine, "gap-failed", Status.FAILED, gap, updated_at=CUTOFF + DAY)
    assert where(engine, "gap-done")[0][0] == "inbox_default"
    blocked = make_ahead(engine, gap, weeks=0)
    assert blocked.skipped == {f"inbox_w{gap:%Y%m%d}": "inbox_default holds rows of this week"}

    retired = retire(engine, CUTOFF, NOW)

    assert "inbox_default" in retired.dropped and retired.carried == 1, retired
    assert "inbox_default" in partition_names(engine)
    assert where(engine, "gap-done") == []
    assert where(engine, "gap-failed") == [(week(4), M + 4 * WEEK, "failed")]
    assert make_ahead(engine, gap, weeks=0).made == [f"inbox_w{gap:%Y%m%d}"]
    assert retire(engine, CUTOFF, NOW).dropped == [f"inbox_w{gap:%Y%m%d}"]  # empty, past retention
    assert "inbox_default" in partition_names(engine)  # empty: not dropped again


@pytest.fixture
def pg_settings(postgres_url: str, tmp_path: Path) -> Iterator[Settings]:
    yield Settings(database_url=postgres_url, local_mode=True).with_values(
        maildir_path=str(tmp_path / "md")
    )


def test_the_cleanup_task_retires_weeks_and_says_what_it_did(
    weeks: Engine, pg_settings: Settings
) -> None:
    engine = weeks
    assert pg_settings.inbox.retention_seconds == RETENTION.total_seconds()
    place(engine, "old-done", Status.DONE, M, at=M + DAY)
    place(engine, "failed-lately", Status.FAILED, M, updated_at=CUTOFF + DAY)
    live = Inbox(engine).claim("live", "job", message("live"), M + WEEK + DAY, LONG_LEASE)
    assert live is not None

    details = run_cleanup(pg_settings, engine, NOW)

    assert details["inbox_purged"] == 1 and details["inbox_rows_carried"] == 1, details
    assert week(0) in details["inbox_partitions_dropped"], details
    assert week(1) not in details["inbox_partitions_dropped"], details
    assert details["inbox_partitions_skipped"][week(1)].startswith("waits for 1 running row")
    assert details["inbox_partitions_made"] == [week(n) for n in (6, 7, 8)], details
    assert (details["more"], details["jobs_purged"]) == (False, 0)
    assert where(engine, "failed-lately")[0][0] == week(4)


def run_cleanup(settings: Settings, engine: Engine, now: datetime) -> dict[str, object]:
    tick = parse_push({}, json.dumps(tick_body("cleanup", publish_time=now)).encode())
    outcome = Dispatcher(settings, engine, build_registry(settings), Clock(now)).dispatch(tick)
    assert outcome.kind.value == "done", outcome.details
    return dict(outcome.details)


def test_a_row_retention_keeps_that_arrives_after_the_survey_stops_the_detach(
    weeks: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check under the inbox's lock is the last word: a survey that saw the week empty of
    rows retention keeps (a claim took a row over just after it) does not get the week dropped."""
    engine, inbox = weeks, Inbox(weeks)
    place(engine, "old-failed", Status.FAILED, M, at=M + DAY)
    monkeypatch.setattr(partitions, "_survey", lambda *_: (0, 0, 1))
    retaken = inbox.claim("old-failed", "job", message("again"), NOW, LONG_LEASE)
    assert retaken is not None and retaken.stored_in == week(0)

    retired = retire(engine, CUTOFF, NOW)

    assert retired.skipped == {week(0): "a row retention keeps arrived before the lock"}, retired
    assert where(engine, "old-failed") == [(week(0), M, "running")]
    assert inbox.finish(retaken, Status.DONE, NOW)


def test_a_lock_not_granted_leaves_the_step_for_the_next_run_without_failing(
    weeks: Engine,
) -> None:
    """A transaction holding the inbox (a long read) keeps retirement and the weeks ahead from
    their locks: each step gives up after its tries, says why, and changes nothing."""
    engine = weeks
    place(engine, "old-done", Status.DONE, M, at=M + DAY)
    with engine.connect() as holder:
        holder.exec_driver_sql("LOCK TABLE inbox IN ACCESS SHARE MODE")
        retired = retire(engine, CUTOFF, NOW)
        made = make_ahead(engine, NOW, weeks=4)
        holder.rollback()
    assert retired.dropped == [] and retired.skipped[week(0)] == partitions.LOCK_NOT_GRANTED
    assert made.made == [] and made.skipped[week(6)] == partitions.LOCK_NOT_GRANTED
    assert week(0) in partition_names(engine) and where(engine, "old-done")[0][0] == week(0)
    assert week(0) in retire(engine, CUTOFF, NOW).dropped  # the next run, the lock free


def test_a_replay_waits_for_the_key_lock_a_carry_holds(weeks: Engine) -> None:
    """A carry moves a row under its key's advisory lock; a replay (rearm) meeting the row
    mid-move would fail with a serialization error, so it waits for the same lock."""
    engine, inbox = weeks, Inbox(weeks)
    place(engine, "dead-lately", Status.DEAD, M, updated_at=CUTOFF + DAY)
    rearmed: list[bool] = []
    with engine.connect() as carry:
        carry.exec_driver_sql("SELECT pg_advisory_xact_lock(hashtextextended('dead-lately', 0))")
        replay = threading.Thread(target=lambda: rearmed.append(inbox.rearm("dead-lately", NOW)))
        replay.start()
        replay.join(timeout=0.5)
        assert replay.is_alive(), "the replay did not wait for the key's lock"
        carry.commit()
    replay.join(timeout=10)
    assert rearmed == [True] and where(engine, "dead-lately") == [(week(0), M, "failed")]
