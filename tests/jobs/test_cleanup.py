"""The cleanup task purges what nobody will ever finish: rows past their retention, including
``running`` rows left by a delivery that died and whose message never came back.

The inbox's row-by-row purge runs on SQLite here: PostgreSQL's inbox is partitioned by week and
retired a week at a time, never row by row (tests/inbox/test_retire.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select, update

from consumer.config.settings import Settings
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.jobs import store as jobs_store
from consumer.jobs.schema import jobs
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import deploy_body, tick_body
from tests.conftest import Clock

CHUNKED = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
"""The inbox purged row by row, at exactly the retention: SQLite's."""
FAKE_NOW = datetime(2020, 6, 1, 12, 0, tzinfo=UTC)
"""Years before the real clock: a cleanup on the real clock would purge every row below."""


def claim(engine: Engine, release: str, leased_at: datetime) -> str:
    message = parse_push({}, json.dumps(deploy_body("web", release)).encode())
    key = f"deploy:web:{release}"
    assert Inbox(engine).claim(key, "deploy", message, leased_at, timedelta(minutes=1))
    return key


@CHUNKED
def test_running_rows_whose_lease_ended_over_the_retention_ago_are_purged(
    engine: Engine, settings: Settings
) -> None:
    now = datetime.now(UTC)
    retention = timedelta(seconds=settings.inbox.retention_seconds)
    abandoned = claim(engine, "abandoned", now - retention - timedelta(hours=1))
    recent = claim(engine, "expired-recently", now - timedelta(hours=1))
    live = claim(engine, "live", now)
    outcome = Dispatcher(settings, engine, build_registry(settings)).dispatch(
        parse_push({}, json.dumps(tick_body("cleanup")).encode())
    )
    assert (outcome.kind.value, outcome.details["inbox_purged"]) == ("done", 1)
    inbox = Inbox(engine)
    assert inbox.get(abandoned) is None
    for key in (recent, live):
        row = inbox.get(key)
        assert row is not None and row.status is Status.RUNNING


def finished_event(engine: Engine, release: str, finished_at: datetime) -> None:
    message = parse_push({}, json.dumps(deploy_body("web", release)).encode())
    inbox, key = Inbox(engine), f"deploy:web:{release}"
    leased = inbox.claim(key, "deploy", message, finished_at, timedelta(minutes=1))
    assert leased and inbox.finish(leased, Status.DONE, finished_at)


def finished_job(engine: Engine, key: str, finished_at: datetime) -> None:
    jobs_store.enqueue(engine, "email", {}, key=key, allow_unknown=True)
    done = {"status": "done", "finished_at": finished_at}
    with engine.begin() as connection:
        connection.execute(update(jobs).where(jobs.c.idempotency_key == key).values(**done))


@CHUNKED
@pytest.mark.clock(FAKE_NOW)
def test_cleanup_purges_exactly_what_is_past_the_retention_at_the_services_clock(
    engine: Engine, settings: Settings, clock: Clock
) -> None:
    minute = timedelta(minutes=1)
    inbox_retention = timedelta(seconds=settings.inbox.retention_seconds)
    job_retention = timedelta(seconds=settings.jobs.retention_seconds)
    finished_event(engine, "old", FAKE_NOW - inbox_retention - minute)
    finished_event(engine, "young", FAKE_NOW - inbox_retention + minute)
    finished_job(engine, "old-job", FAKE_NOW - job_retention - minute)
    finished_job(engine, "young-job", FAKE_NOW - job_retention + minute)
    tick = parse_push({}, json.dumps(tick_body("cleanup", publish_time=FAKE_NOW)).encode())
    outcome = Dispatcher(settings, engine, build_registry(settings), clock).dispatch(tick)
    assert outcome.kind.value == "done", outcome.details
    assert (outcome.details["inbox_purged"], outcome.details["jobs_purged"]) == (1, 1)
    inbox = Inbox(engine)
    assert inbox.get("deploy:web:old") is None and inbox.get("deploy:web:young") is not None
    with engine.connect() as connection:
        assert list(connection.scalars(select(jobs.c.idempotency_key))) == ["young-job"]
