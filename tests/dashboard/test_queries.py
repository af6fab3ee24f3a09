"""The dashboard's read queries and its one store addition, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from flask import Flask
from sqlalchemy import Engine, event

from consumer.config.settings import Settings
from consumer.dashboard import queries
from consumer.dashboard.app import create_dashboard
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.jobs import store
from consumer.jobs.model import Status as JobStatus
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.ticks.store import TickStore
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import tick_body
from consumer.wire.schedule import Every
from consumer.wire.timeutil import floor_to_period, utcnow
from tests.dashboard.data import PLUGIN, seed


def dashboard_of(settings: Settings, engine: Engine | None = None) -> Flask:
    """The dashboard for settings built in code (its engine made here unless given)."""
    return create_dashboard(Service.of(settings, engine or make_engine(settings.database_url)))


@pytest.fixture
def seeded(engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("DASHBOARD_TEST_SWITCH", raising=False)
    settings = Settings(database_url=database_url, local_mode=True, plugins=(PLUGIN,))
    seed(settings, engine)
    return settings


def test_overview_counts(engine: Engine, seeded: Settings) -> None:
    now = utcnow()
    view = queries.overview(engine, build_registry(seeded), now)
    assert (view.dead_events, view.unroutable_events, view.dead_jobs) == (2, 1, 2)
    assert view.deliveries_hour == view.deliveries_day == {"dead": 2, "unroutable": 1, "done": 1}
    assert view.jobs == {"report": {"dead": 2, "done": 1, "pending": 2}}
    assert view.oldest_due_seconds is not None and 170 < view.oldest_due_seconds < 400
    tomorrow = queries.overview(engine, build_registry(seeded), now + timedelta(days=2))
    assert tomorrow.deliveries_day == {}


def test_each_page_counts_the_jobs_in_one_aggregate(engine: Engine, seeded: Settings) -> None:
    """A retained week of jobs is some 300,000 rows: a page may scan them once, grouped by kind
    and status in the database, and reads every other job query by an index or a LIMIT."""
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *call: statements.append(call[2]))
    client = dashboard_of(seeded, engine).test_client()
    for page, shown in (("/", "report"), ("/jobs", "Retry all 2 dead report jobs")):
        statements.clear()
        response = client.get(page)
        assert response.status_code == 200 and shown in response.get_data(as_text=True)
        scans = [
            s for s in statements if "FROM jobs" in s and not {"WHERE", "LIMIT"} & set(s.split())
        ]
        assert len(scans) == 1 and "GROUP BY jobs.kind, jobs.status" in scans[0], (page, scans)


def test_inbox_filters(engine: Engine, seeded: Settings) -> None:
    assert {r.key for r in queries.inbox_rows(engine, Status.DEAD)} == {
        "deploy:shop:r1", "deploy:shop:r2"
    }  # fmt: skip
    assert [r.route for r in queries.inbox_rows(engine, route="tick")] == ["tick", "tick"]
    assert [r.key for r in queries.inbox_rows(engine, key_contains="shop:r2")] == ["deploy:shop:r2"]
    assert queries.inbox_rows(engine, key_contains="%") == []  # a literal, not a wildcard
    assert queries.inbox_rows(engine, limit=1)[0].updated_at == max(
        r.updated_at for r in queries.inbox_rows(engine)
    )
    assert queries.dead_keys(engine, "deploy", 1) == ["deploy:shop:r1"]  # oldest first
    assert queries.dead_events_by_route(engine) == {"deploy": 2}


def test_retry_dead_of_kind_touches_only_that_kind(engine: Engine, seeded: Settings) -> None:
    other = store.enqueue(engine, "email", {}, max_attempts=1).job_id
    with engine.begin() as connection:
        connection.execute(jobs.update().where(jobs.c.id == other).values(status="dead"))
    assert JobStore(engine).retry_dead_of_kind(utcnow(), "report") == 2
    assert JobStore(engine).retry_dead_of_kind(utcnow(), "report") == 0
    email = JobStore(engine).get(other)  # type: ignore[arg-type]
    assert email is not None and email.status is JobStatus.DEAD
    retried = [j for j in JobStore(engine).list(JobStatus.PENDING) if j.errors]
    assert len(retried) == 2 and all(j.attempts == 0 for j in retried)  # history kept


def test_task_schedules(engine: Engine, seeded: Settings) -> None:
    registry, now = build_registry(seeded), utcnow()
    sweep = {t.name: t for t in queries.task_schedules(engine, registry, now)}["sweep"]
    assert sweep.last_slot is not None
    assert timedelta(0) <= now - sweep.last_slot < timedelta(seconds=600)
    assert sweep.next_due == floor_to_period(now, 300) + timedelta(seconds=300)
    assert not sweep.late
    later = {t.name: t for t in queries.task_schedules(engine, registry, now + timedelta(hours=1))}
    assert later["sweep"].late and not later["cleanup"].late  # never completed is not "late"
    TickStore(engine).advance_slot("retired-task", now, "60")
    names = [t.name for t in queries.task_schedules(engine, registry, now)]
    assert "retired-task" in names and names == sorted(names)


def test_status_and_dashboard_show_the_schedule_the_server_ran(
    engine: Engine, seeded: Settings
) -> None:
    """``consumer serve --local`` ticks the sweep every 10 s (its own override); a ``consumer
    status`` or dashboard in another process, without that override, shows 10 s and the next
    10 s slot, not its own 5 minutes."""
    served = build_registry(seeded.with_values(tick_periods={"sweep": Every(10)}))
    now = utcnow()
    if floor_to_period(now, 10) == floor_to_period(now, 300):
        # The seed swept in the 5-minute slot, and in the first 10 s after a 5-minute boundary
        # the 10 s slot has the same key (a duplicate; the slot before is behind it: skipped).
        # Wait for the next 10 s slot, at most 10 s in one run of 30.
        time.sleep((floor_to_period(now, 10) + timedelta(seconds=10) - now).total_seconds())
        now = utcnow()
    outcome = Dispatcher(seeded, engine, served).dispatch(
        parse_push({}, json.dumps(tick_body("sweep", publish_time=now)).encode())
    )
    assert outcome.kind.value == "done", outcome
    elsewhere = build_registry(seeded)  # this process's own schedule: every 300 s
    assert elsewhere.schedule_of("sweep") == Every(300)
    sweep = {t.name: t for t in queries.task_schedules(engine, elsewhere, now)}["sweep"]
    assert sweep.period_seconds == 10
    assert sweep.next_due == floor_to_period(now, 10) + timedelta(seconds=10)
    cleanup = {t.name: t for t in queries.task_schedules(engine, elsewhere, now)}["cleanup"]
    assert cleanup.period_seconds == elsewhere.schedule_of("cleanup").seconds  # never ran here
