"""Long files: the time budget splits them across deliveries (each resuming at the last commit),
and the heartbeat keeps the inbox lease so a redelivery cannot start a second copy."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest

from bench.support import storage_plugin as plugin
from consumer.config.settings import Settings
from consumer.errors import Unavailable
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.storage.budget import BudgetExhausted, Pacer
from consumer.storage.model import FileStatus
from consumer.wire.outcomes import Kind, Outcome
from tests.storage.conftest import Harness, email_csv


def with_plugin(harness: Harness) -> None:
    registry = Registry()
    registry.processors = harness.handler.processors  # the table the harness's handler reads
    registry.storage(harness.handler)
    plugin.register(registry)


def slow_rule(harness: Harness, delay: float) -> dict[str, object]:
    options = {"delay": delay, "batch_rows": 100}
    return {"bucket": harness.bucket, "processor": "slow-import", "options": options}


def test_a_file_longer_than_its_budget_is_finished_by_redeliveries(harness: Harness) -> None:
    with_plugin(harness)
    # A one-second budget; each batch takes 0.2 s: a delivery commits a few batches, then 503.
    slow = harness.with_rules(
        [slow_rule(harness, 0.2)], ack_deadline_seconds=10, safety_margin_seconds=9,
        max_attempts=20,
    )  # fmt: skip
    generation = slow.upload("long.csv", email_csv(600))
    outcomes: list[Outcome] = []
    while not outcomes or outcomes[-1].kind is not Kind.DONE:
        outcomes.append(slow.notify("long.csv", generation))
        assert len(outcomes) < 10, [outcome.details for outcome in outcomes]

    retries = outcomes[:-1]
    assert retries  # at least one budget window ran out (batches grow, so how many varies)
    assert all(outcome.http_status == 503 for outcome in retries)
    assert all("time budget exhausted" in outcome.details["error"] for outcome in retries)
    keys = slow.job_keys()
    assert len(keys) == len(set(keys)) == 600
    row = slow.file("long.csv", generation)
    assert row.status is FileStatus.DONE and row.attempts == len(outcomes)
    # Each batch was inserted once: resuming skipped the committed rows instead of re-adding them.
    assert (row.progress.rows_accepted, row.progress.jobs_created) == (600, 600)


def test_a_file_needing_more_deliveries_than_max_attempts_still_finishes(
    harness: Harness,
) -> None:
    with_plugin(harness)
    # Each delivery commits a batch or two and runs out of budget: more deliveries than
    # max_attempts, each refunded because it committed progress.
    slow = harness.with_rules(
        [slow_rule(harness, 0.3)], ack_deadline_seconds=10, safety_margin_seconds=9,
        max_attempts=2,
    )  # fmt: skip
    generation = slow.upload("long.csv", email_csv(600))
    outcomes: list[Outcome] = []
    while not outcomes or outcomes[-1].kind is Kind.RETRY:
        outcomes.append(slow.notify("long.csv", generation))
        assert len(outcomes) < 12, [outcome.details for outcome in outcomes]

    assert outcomes[-1].kind is Kind.DONE, outcomes[-1].details
    assert len(outcomes) > 2  # more deliveries than max_attempts, none of them dead
    keys = slow.job_keys()
    assert len(keys) == len(set(keys)) == 600
    assert slow.file("long.csv", generation).status is FileStatus.DONE


def test_a_budget_stop_without_progress_spends_attempts_until_dead(harness: Harness) -> None:
    with_plugin(harness)
    rule = {"bucket": harness.bucket, "processor": "stuck-import"}
    stuck = harness.with_rules([rule], max_attempts=3)
    generation = stuck.upload("stuck.csv", email_csv(5))
    outcomes = [stuck.notify("stuck.csv", generation) for _ in range(3)]
    assert [outcome.kind for outcome in outcomes] == [Kind.RETRY, Kind.RETRY, Kind.DEAD]
    assert "time budget exhausted" in outcomes[-1].details["error"]


def lease_until(harness: Harness, key: str) -> datetime | None:
    row = Inbox(harness.engine).get(key)
    return row.lease_until if row else None


@pytest.mark.slow
def test_the_heartbeat_keeps_the_lease_and_a_redelivery_out(harness: Harness) -> None:
    with_plugin(harness)
    # Lease 17 s, renewed every 4.25 s; ten 0.5 s batches sleep 5 s (so at least one renewal
    # comes before the end), inside the 11 s budget with room for a loaded machine's slowness.
    slow = harness.with_rules(
        [slow_rule(harness, 0.5)], ack_deadline_seconds=14, safety_margin_seconds=3
    )
    generation = slow.upload("long.csv", email_csv(1000))
    key = f"storage:{slow.bucket}/long.csv#{generation}:OBJECT_FINALIZE"
    done: list[Outcome] = []
    worker = threading.Thread(target=lambda: done.append(slow.notify("long.csv", generation)))
    worker.start()
    while lease_until(slow, key) is None:
        time.sleep(0.05)
    first_lease, latest = lease_until(slow, key), None
    duplicate = slow.notify("long.csv", generation)
    while worker.is_alive():
        latest = lease_until(slow, key) or latest
        time.sleep(0.1)
    worker.join()

    # A GCS duplicate has its own messageId: acknowledged while the first copy runs.
    assert duplicate.kind is Kind.IN_PROGRESS and duplicate.http_status == 200
    assert done[0].kind is Kind.DONE, done[0].details
    assert first_lease is not None and latest is not None
    assert (latest - first_lease).total_seconds() >= 3
    assert slow.job_count() == 1000


def test_the_pacer_beats_every_quarter_lease_and_guards_the_budget() -> None:
    now = [0.0]
    beats: list[float] = []
    context = HandlerContext(
        settings=Settings.of(local_mode=True, ack_deadline_seconds=30, inbox_lease_seconds=40),
        engine=None,  # type: ignore[arg-type]
        key="k", attempt=1, deadline=time.monotonic() + 20,
        renew_lease=lambda: beats.append(now[0]) is None,
    )  # fmt: skip
    pacer = Pacer(context, clock=lambda: now[0])
    for step in range(80):  # 40 s in half-second steps; lease 40 s -> a beat every 10 s
        now[0] = step / 2
        pacer.tick()
    assert beats == [10.0, 20.0, 30.0]
    pacer.ensure(1.0, "here")
    try:
        pacer.ensure(25.0, "after line 7")
    except BudgetExhausted as exc:
        assert "after line 7" in str(exc)
    else:
        raise AssertionError("the budget guard did not stop")


def test_a_rule_can_ask_for_delete_events(harness: Harness) -> None:
    with_plugin(harness)
    rules = [{"bucket": harness.bucket, "events": ["OBJECT_DELETE"], "processor": "audit"}]
    audited = harness.with_rules(rules)
    outcome = audited.notify("old.csv", 123, event="OBJECT_DELETE")
    assert outcome.kind is Kind.DONE
    assert outcome.details["audited"] == f"gs://{harness.bucket}/old.csv#123"
    assert outcome.details["has_content"] is False


def test_a_heartbeat_the_database_cannot_take_is_tried_again_a_second_later() -> None:
    now = [0.0]
    beats: list[float] = []

    def renew() -> bool:
        beats.append(now[0])
        if len(beats) == 1:
            raise Unavailable("database unavailable: OperationalError")
        return True

    context = HandlerContext(
        settings=Settings.of(local_mode=True, ack_deadline_seconds=30, inbox_lease_seconds=40),
        engine=None,  # type: ignore[arg-type]
        key="k", attempt=1, deadline=time.monotonic() + 20, renew_lease=renew,
    )  # fmt: skip
    pacer = Pacer(context, clock=lambda: now[0])
    for step in range(50):  # 25 s in half-second steps; a beat due every 10 s
        now[0] = step / 2
        pacer.tick()  # the blip is no error: the lease has three quarters left
    assert beats == [10.0, 11.0, 21.0]
