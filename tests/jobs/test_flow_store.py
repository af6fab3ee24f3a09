"""``FlowStore``: the flow-control statements of a limited kind's claim, on both databases, and
``StartSlots``, the rate's start slots a sweeper waits for."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from consumer.jobs.flow_store import FlowStore
from consumer.jobs.model import Job, NewJob, Status
from consumer.jobs.slots import StartSlots
from consumer.jobs.store import JobStore, enqueue_many
from consumer.wire.timeutil import utcnow


def test_a_kinds_rows_are_made_once_then_locked_counted_and_its_rate_state_kept(
    engine: Engine,
) -> None:
    flows = FlowStore(engine)
    with engine.begin() as connection:
        enqueue_many(connection, [NewJob("call", {}) for _ in range(3)], allow_unknown=True)
    now = utcnow()
    params = {"flow_kind": "call", "now": now}
    with engine.begin() as connection:
        assert flows.peek(connection, params) is None
        assert flows.lock_row(connection, params) is None
        flows.ensure_rows(connection, params)
        flows.ensure_rows(connection, params)  # a second claim's: nothing new, no error
        assert tuple(flows.lock_row(connection, params)) == (None, None)
        assert flows.any_due(connection, params)
        assert flows.running(connection, params) == 0
        until = now + timedelta(minutes=5)
        JobStore(engine).claim("t", 2, ["call"], now, until, connection=connection)
        assert flows.running(connection, params) == 2
        if flows.dialect == "postgresql":  # the shards are there: locked, then counted
            row = flows.lock_cap(connection, {**params, "first_shard": 0, "last_shard": 7})
            assert row is not None and row[2] == 2
        flows.set_tat(connection, params, now + timedelta(seconds=1))
        limits, tat = flows.peek(connection, params)
        assert limits is None and abs((tat - now).total_seconds() - 1) < 1e-3
        assert flows.overrides(connection) == {}
    with engine.begin() as connection:
        assert not flows.any_due(connection, {"flow_kind": "other", "now": now})


def test_a_job_waits_for_its_slot_and_one_without_a_slot_starts_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slots, now = StartSlots(), utcnow()
    job = Job(7, "call", {}, Status.RUNNING, 0, now, 1, None, None, now)
    # Timed from before the schedule (a stall between schedule and start shortens the wait that
    # follows, not the time to the slot), and the second start's sleeps counted, not timed.
    scheduled = time.monotonic()
    slots.schedule([job], [now + timedelta(seconds=0.2)], now, 0.2)
    slots.start_at(job)
    assert time.monotonic() - scheduled >= 0.199  # not before its slot (0.001: float rounding)
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    slots.start_at(job)  # its slot was used: no wait
    assert sleeps == []
