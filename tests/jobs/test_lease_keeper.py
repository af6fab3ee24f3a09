"""The job lease keeper ends: it renews nothing past the sweep's deadline (a sweep stuck in a job
lets its batch go about one lease later), and the sweep waits at most ``join_seconds`` for a
renewal in flight as it ends (a renewal stuck on the database must not hold the request past the
watchdog)."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from sqlalchemy import Engine

from consumer.jobs.lease import LeaseKeeper
from consumer.jobs.model import Renewed
from consumer.wire.timeutil import utcnow


class Renewals:
    """A job store's ``renew``, counted; each blocks while ``stuck`` is clear."""

    def __init__(self) -> None:
        self.count, self.stuck = 0, threading.Event()
        self.stuck.set()

    def renew(self, token: str, lease_until: datetime) -> Renewed:
        self.count += 1
        self.stuck.wait(30)
        return Renewed(1)


def test_a_lease_is_not_renewed_past_the_sweep_s_deadline(engine: Engine) -> None:
    renewals = Renewals()
    keeper = LeaseKeeper(engine, 0.15, utcnow, until=time.monotonic() + 0.3)
    keeper.store = renewals  # type: ignore[assignment]
    with keeper:
        keeper.hold("t", time.monotonic())
        time.sleep(0.35)
        at_deadline = renewals.count
        time.sleep(0.4)
        assert not keeper.ensure_fresh(time.monotonic())  # no catching up past it either
    assert 3 <= at_deadline <= 7, at_deadline
    assert renewals.count == at_deadline


def test_the_end_of_a_sweep_waits_for_a_stuck_renewal_at_most_join_seconds(
    engine: Engine,
) -> None:
    renewals = Renewals()
    keeper = LeaseKeeper(engine, 0.15, utcnow, join_seconds=0.5)
    keeper.store = renewals  # type: ignore[assignment]
    with keeper:
        keeper.hold("t", time.monotonic())
        renewals.stuck.clear()  # the next renewal hangs on the database
        time.sleep(0.2)
        ending = time.monotonic()
    assert time.monotonic() - ending < 1.5
    renewals.stuck.set()
