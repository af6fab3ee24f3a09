"""Debounce proven through real servers on PostgreSQL: 10 bursts of 100 enqueues (each burst
one debounce key, its first 99 enqueues from 4 threads at once, then its last), then three
sweeping processes of eight threads each (``tests.jobs.flow_runner``) work them off against the
recording HTTP target (``tests.jobs.flow_server``): 10 calls, each with its burst's last
payload."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from consumer import enqueue
from consumer.jobs.model import Debounce
from tests.jobs.test_flow_hammer import KIND, db, log_of, run, serve, statuses, target_env

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres]
__all__ = ["db", "serve"]  # the fixtures, used by name
BURSTS, PER_BURST, THREADS = 10, 100, 4


def test_10_bursts_of_100_enqueues_are_10_calls_each_with_its_last_payload(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.01)

    def add(number: int, n: int) -> None:
        debounce = Debounce(f"burst-{number}", quiet=2, max_wait=60)
        enqueue(db, KIND, {"burst": number, "n": n}, kinds=[KIND], debounce=debounce)

    def burst(number: int, thread: int) -> None:
        for n in range(thread, PER_BURST - 1, THREADS):
            add(number, n)

    for number in range(BURSTS):
        threads = [threading.Thread(target=burst, args=(number, t)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        add(number, PER_BURST - 1)  # the burst's last enqueue, after the concurrent ones
    assert statuses(db) == {"pending": BURSTS}
    run(target_env(postgres_url, server), seconds=30)
    calls = log_of(server)["calls"]
    got = sorted((call["payload"]["burst"], call["payload"]["n"]) for call in calls)
    print("debounced calls", got)
    assert got == [(number, PER_BURST - 1) for number in range(BURSTS)]
    assert statuses(db) == {"done": BURSTS}
