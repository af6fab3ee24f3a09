"""Ticks as schedules, through the real app and inbox (SQLite and PostgreSQL): a tick stamped in
the future takes no slot, cron ticks key and coalesce by fire time, settings override both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.inbox.schema import inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.ticks import policy as ticks
from consumer.ticks.store import TickStore
from consumer.wire.envelopes_out import tick_body
from consumer.wire.events import TickEvent
from tests.conftest import Clock
from tests.plugins.effects import effect_rows, record


def on_tick(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    """A non-idempotent effect: one row per run, so a run too many (or too few) shows."""
    from tests.plugins.effects import effects_metadata

    effects_metadata.create_all(context.engine)
    record(context.engine, context.key, "effect")
    return {"slot": event.slot.isoformat()}


def registry() -> Registry:
    registry = Registry()
    ticks.register(registry)  # the tick rules, as the built-ins install them
    registry.tick("sweep", period_seconds=10)(on_tick)
    registry.tick("report", cron="0 9 * * 1-5", timezone="Europe/Madrid")(on_tick)
    return registry


def client_at(settings: Settings, engine: Engine, clock: Clock, reg: Registry) -> FlaskClient:
    return create_app(Service(settings, reg, engine), clock=clock).test_client()


def tick(client: FlaskClient, task: str, publish_time: datetime) -> dict[str, Any]:
    response = client.post("/push", json=tick_body(task, publish_time=publish_time))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json or {}


def inbox_rows(engine: Engine, key: str) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).where(inbox.c.key == key)) or 0)


def test_tick_from_the_future_takes_no_slot_and_the_genuine_tick_runs(
    settings: Settings, engine: Engine
) -> None:
    """The issue's case: sweep every 10 s, a tick published 25 s ahead of our clock."""
    clock = Clock(datetime(2026, 11, 30, 12, 0, 1, tzinfo=UTC))
    client = client_at(settings, engine, clock, registry())
    forged = tick(client, "sweep", clock.now + timedelta(seconds=25))
    assert forged["outcome"] == "skipped" and forged["recorded"] is False
    assert "in the future" in forged["reason"]
    assert inbox_rows(engine, forged["key"]) == 0
    assert TickStore(engine).last_slot("sweep") is None  # the completed slot did not advance
    assert effect_rows(engine) == []
    clock.now += timedelta(seconds=25)  # the slot comes: Cloud Scheduler's own tick
    genuine = tick(client, "sweep", clock.now)
    assert (genuine["key"], genuine["outcome"]) == (forged["key"], "done")
    assert len(effect_rows(engine)) == 1


def test_a_tick_within_the_tolerance_runs(settings: Settings, engine: Engine) -> None:
    """A publisher clock a little ahead of ours (under the tolerance) is not a forgery."""
    clock = Clock(datetime(2026, 11, 30, 12, 0, 8, tzinfo=UTC))
    client = client_at(settings, engine, clock, registry())
    early = tick(client, "sweep", clock.now + timedelta(seconds=3))  # slot 12:00:10, 2 s ahead
    assert early["outcome"] == "done"
    assert early["key"] == "tick:sweep:2026-11-30T12:00:10+00:00"


def test_the_tolerance_is_a_setting(settings: Settings, engine: Engine) -> None:
    strict = Settings.of(database_url=settings.database_url, local_mode=True,
                      tick_future_tolerance_seconds=0)  # fmt: skip
    clock = Clock(datetime(2026, 11, 30, 12, 0, 8, tzinfo=UTC))
    client = client_at(strict, engine, clock, registry())
    assert tick(client, "sweep", clock.now + timedelta(seconds=3))["outcome"] == "skipped"
    assert effect_rows(engine) == []


def test_a_tick_from_far_in_the_past_stays_skipped_and_recorded(
    settings: Settings, engine: Engine
) -> None:
    clock = Clock(datetime(2026, 11, 30, 12, 0, 1, tzinfo=UTC))
    client = client_at(settings, engine, clock, registry())
    old = tick(client, "sweep", clock.now - timedelta(minutes=5))
    assert old["outcome"] == "skipped" and "older than" in old["reason"]
    assert inbox_rows(engine, old["key"]) == 1


def test_cron_ticks_are_keyed_by_their_fire_time(settings: Settings, engine: Engine) -> None:
    """Monday 30 November 2026, 09:00 in Madrid is 08:00 UTC; copies of one run collapse."""
    clock = Clock(datetime(2026, 11, 30, 8, 0, 2, tzinfo=UTC))
    client = client_at(settings, engine, clock, registry())
    first = tick(client, "report", datetime(2026, 11, 30, 8, 0, 1, tzinfo=UTC))
    assert (first["key"], first["outcome"]) == ("tick:report:2026-11-30T08:00:00+00:00", "done")
    clock.now += timedelta(hours=3)  # a duplicated Scheduler run, much later the same day
    again = tick(client, "report", datetime(2026, 11, 30, 11, 0, tzinfo=UTC))
    assert (again["key"], again["outcome"]) == (first["key"], "duplicate")
    assert len(effect_rows(engine)) == 1


def test_cron_backlog_keeps_only_the_latest_fires(settings: Settings, engine: Engine) -> None:
    """After a week's outage, the weekday report's backlog runs its last two fire times only:
    Friday's report arrives after the weekend and runs; Wednesday's and Thursday's are stale."""
    clock = Clock(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))  # Monday, after its 09:00 run
    client = client_at(settings, engine, clock, registry())
    days = [datetime(2026, 11, day, 8, 0, 30, tzinfo=UTC) for day in (25, 26, 27, 30)]
    outcomes = [tick(client, "report", day)["outcome"] for day in days]
    assert outcomes == ["skipped", "skipped", "done", "done"]
    assert len(effect_rows(engine)) == 2


def test_settings_override_a_period_with_a_cron_schedule(
    settings: Settings, engine: Engine
) -> None:
    env = {"CONSUMER_DATABASE_URL": settings.database_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_TICK_PERIODS": "sweep=cron:*/15 * * * *@Asia/Kolkata"}  # fmt: skip
    configured = Settings.from_env(env)
    reg = build_registry(configured)
    reg.tick("sweep", period_seconds=10, replace=True)(on_tick)  # every 10 s; the setting wins
    clock = Clock(datetime(2026, 11, 30, 12, 7, 0, tzinfo=UTC))
    client = client_at(configured, engine, clock, reg)
    answer = tick(client, "sweep", clock.now)
    assert answer["key"] == "tick:sweep:2026-11-30T12:00:00+00:00"  # 17:30 IST


@pytest.mark.parametrize("hours", [1, 48])
def test_forged_ticks_cannot_block_later_cron_slots(
    settings: Settings, engine: Engine, hours: int
) -> None:
    clock = Clock(datetime(2026, 11, 30, 8, 30, tzinfo=UTC))
    client = client_at(settings, engine, clock, registry())
    stamped = datetime(2026, 12, 1, 8, 0, 5, tzinfo=UTC) + timedelta(hours=hours)
    forged = tick(client, "report", stamped)
    assert forged["recorded"] is False and inbox_rows(engine, forged["key"]) == 0
    clock.now = stamped
    genuine = tick(client, "report", stamped)
    assert (genuine["key"], genuine["outcome"]) == (forged["key"], "done")
