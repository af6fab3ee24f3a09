"""The re-drive (``consumer.pipeline.redrive``): a ``running`` row whose delivery died and that no
redelivery took over is run again by the next sweep from its stored message, once, under the
inbox claim's guard; a live claim is left alone. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.redrive import Redrive, redrive_in
from consumer.pipeline.running import context_for
from consumer.service import Service
from consumer.ticks.hook import tick_message
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import storage_body, tick_body
from tests.conftest import Clock
from tests.plugins.effects import effect_rows

pytestmark = pytest.mark.clock(datetime(2026, 11, 29, 12, 0, 1, tzinfo=UTC))
LEASE = timedelta(seconds=4)
AFTER = 120  # the default: two ack deadlines of 60 s


@pytest.fixture
def service(settings: Settings, engine: Engine) -> Service:
    effects = settings.with_values(plugins=("tests.plugins.effects",))
    effect_rows(engine)  # the effects table exists before threads race to create it
    return Service.of(effects, engine)


def left_running(service: Service, clock: Clock, body: dict[str, Any], key: str = "") -> str:
    """Claim the event of ``body`` as a delivery that then died would have; its key."""
    dispatcher = Dispatcher(service.settings, service.engine, service.registry, clock)
    event = dispatcher.classify(parse_push({}, json.dumps(body).encode()))
    key = key or event.key
    assert Inbox(service.engine).claim(key, event.route, event.message, clock(), LEASE)
    return key


def slow(body: dict[str, Any], seconds: float = 0.01) -> dict[str, Any]:
    """The effect sleeps first (racing re-drives overlap on it)."""
    body["message"].setdefault("attributes", {})["sleep"] = str(seconds)
    return body


def sweep(service: Service, clock: Clock) -> dict[str, Any]:
    client = create_app(service, clock=clock).test_client()
    answer = client.post("/push", json=tick_body("sweep", publish_time=clock.now)).get_json()
    assert answer["outcome"] == "done", answer
    return dict(answer)


def redrives(route: str) -> float:
    return REGISTRY.get_sample_value("consumer_inbox_redrives_total", {"route": route}) or 0.0


def effects_of(engine: Engine, key: str) -> int:
    return sum(1 for row in effect_rows(engine) if row.key == key)


def test_a_row_left_running_is_re_driven_once_even_a_tick_whose_slot_is_old(
    service: Service, engine: Engine, clock: Clock
) -> None:
    tick = left_running(service, clock, tick_body("effect", publish_time=clock.now))
    upload = left_running(service, clock, storage_body("b", "orders/1.csv", "7"))
    before = redrives("tick"), redrives("storage")
    clock.advance(AFTER + 10 * 60)  # long lapsed; ten newer slots of "effect" began meanwhile

    first = sweep(service, clock)
    for key in (tick, upload):
        row = Inbox(engine).get(key)
        assert row is not None and (row.status, row.attempts) == (Status.DONE, 2), row
        assert effects_of(engine, key) == 1
    assert first["redriven"] == 2
    assert (redrives("tick"), redrives("storage")) == (before[0] + 1, before[1] + 1)
    clock.advance(AFTER + 300)
    assert sweep(service, clock)["redriven"] == 0  # done rows are not run again
    assert effects_of(engine, tick) == effects_of(engine, upload) == 1


def test_a_live_or_recently_lapsed_claim_is_not_touched(
    service: Service, engine: Engine, clock: Clock
) -> None:
    recent = left_running(service, clock, storage_body("b", "recent.csv", "1"))
    clock.advance(59)
    live = left_running(service, clock, storage_body("b", "live.csv", "1"))
    clock.advance(1)  # recent's lease ran out 56 s ago, live's holds 3 s more
    assert sweep(service, clock)["redriven"] == 0
    for key in (live, recent):
        row = Inbox(engine).get(key)
        assert row is not None and (row.status, row.attempts) == (Status.RUNNING, 1), row
        assert effects_of(engine, key) == 0


def test_a_sweep_left_running_is_re_driven_by_the_next_sweep(
    service: Service, engine: Engine, clock: Clock
) -> None:
    """The lost tick of the chaos run: ``tick:sweep:<slot>`` left running."""
    lost = left_running(service, clock, tick_body("sweep", publish_time=clock.now))
    clock.advance(AFTER + 300)
    redriven = sweep(service, clock)["redriven"]
    row = Inbox(engine).get(lost)
    assert row is not None and row.status is Status.DONE
    assert redriven == 1
    assert row.result["redriven"] == 0  # the re-driven sweep did not re-drive in turn


def test_a_stored_message_that_is_no_longer_its_event_is_recorded_dead(
    service: Service, engine: Engine, clock: Clock
) -> None:
    """A tick whose schedule changed keys its slot otherwise: it can never run under its key."""
    old_key = "tick:effect:2026-11-29T11:00:30+00:00"
    left_running(service, clock, tick_body("effect", publish_time=clock.now), key=old_key)
    clock.advance(AFTER + 60)
    redriven = sweep(service, clock)["redriven"]
    row = Inbox(engine).get(old_key)
    assert row is not None and row.status is Status.DEAD
    assert row.error is not None and "would now run as" in row.error
    assert redriven == 1
    assert effect_rows(engine) == []


def test_concurrent_re_drives_run_each_effect_once(
    service: Service, engine: Engine, clock: Clock
) -> None:
    """Four re-drives at once, as on four pods, over the same lapsed rows, round after round."""
    for round_ in range(3):
        keys = [
            left_running(service, clock, slow(storage_body("b", f"r{round_}/{n}.csv", "1")))
            for n in range(12)
        ]
        clock.advance(AFTER + 60)
        runs = race(service, clock, threads=4)
        assert sum(run.ran for run in runs) == len(keys)
        for key in keys:
            row = Inbox(engine).get(key)
            assert row is not None and row.status is Status.DONE, row
            assert effects_of(engine, key) == 1, key


def race(service: Service, clock: Clock, threads: int) -> list[Redrive]:
    """``threads`` re-drive runs started together; each goes on while lapsed rows are left (a
    run that met SQLite's busy writer stops, as a sweep's would, and the next one goes on)."""
    settings, engine, registry = service.settings, service.engine, service.registry
    runs = [
        Redrive(settings, engine, registry, clock, time.monotonic() + 60) for _ in range(threads)
    ]
    start = threading.Barrier(threads)

    def run(redrive: Redrive) -> None:
        start.wait()
        for _ in range(20):
            redrive.run()
            if not Inbox(engine).lapsed(clock() - timedelta(seconds=AFTER), 1):
                return

    workers = [threading.Thread(target=run, args=(redrive,)) for redrive in runs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    return runs


def test_a_run_starts_rows_only_while_its_window_is_open(
    service: Service, engine: Engine, clock: Clock
) -> None:
    """Each re-driven row has a handler budget of its own: rows start only early in the sweep's
    delivery, so they end before its ack deadline; the rest wait for the next sweep."""
    keys = [left_running(service, clock, slow(storage_body("b", f"{n}.csv", "1"), 0.3))
            for n in range(5)]  # fmt: skip
    clock.advance(AFTER + 60)
    settings, registry = service.settings, service.registry
    late = context_for(
        settings, engine, "tick:sweep:x", 1, budget=settings.handler_budget_seconds - 6
    )
    assert redrive_in(late, registry) == 0  # a sweep past the first half of its safety margin
    redrive = Redrive(settings, engine, registry, clock, time.monotonic() + 0.5)
    redrive.run()
    assert 1 <= redrive.ran <= 2
    statuses = [row.status for key in keys if (row := Inbox(engine).get(key)) is not None]
    assert statuses.count(Status.RUNNING) == len(keys) - redrive.ran


def test_a_declared_service_re_drives_a_tick_that_came_through_its_own_endpoint(
    service: Service, engine: Engine, clock: Clock
) -> None:
    """Outside local mode every delivery is admitted by its source (``CONSUMER_SOURCES``). A row
    exists only because its delivery was admitted, so its re-drive is not judged again: a tick
    sent to ``POST /ticks/effect`` (subscription ``ticks``, which no declaration names) was
    refused at its re-drive, recorded under a ``refused:`` key, and its own row stayed
    ``running`` for ever."""
    declared = service.settings.with_values(
        local_mode=False, sources={"projects/p/subscriptions/jobs-push": frozenset({"job"})}
    )
    served = Service.of(declared, engine)
    dispatcher = Dispatcher(declared, engine, served.registry, clock)
    message = tick_message("effect", b"", clock.now, {}, signed=False)
    event = dispatcher.classify(message)
    assert Inbox(engine).claim(event.key, event.route, event.message, clock(), LEASE)
    clock.advance(AFTER + 10)

    Redrive(declared, engine, served.registry, clock, time.monotonic() + 60).run()
    row = Inbox(engine).get(event.key)
    assert row is not None and (row.status, row.attempts) == (Status.DONE, 2), row
    assert effects_of(engine, event.key) == 1
