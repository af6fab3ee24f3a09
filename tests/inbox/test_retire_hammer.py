"""A key stays unique across week partitions while retirement carries rows between them: 8
threads claim the same 40 keys at once, half with a clock just before a week's end and half just
after it (so a key's first claims would place it in two different partitions, where no unique
index sees both), finishing each claim they win, while another thread retires the week before
over and over (carrying the finished rows to a later week). Each key is claimed exactly once and
has exactly one row.

Without the advisory lock in ``consumer_inbox_claim`` two claims of a key, one in each week,
each find no row and each insert one: this test then fails."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from consumer.inbox.model import Status
from consumer.inbox.partitions import Retired, make_ahead, retire
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage
from tests.inbox.weeks import WEEK, monday

pytestmark = pytest.mark.postgres

THREADS = 8
KEYS = [f"hammer:{n}" for n in range(40)]
A = monday(8)
B = A + WEEK
"""The week boundary the claims straddle."""
CLAIMED_AT = (B - timedelta(seconds=1), B + timedelta(seconds=1))
LEASE = timedelta(days=60)
"""Longer than the test's clocks reach: no claim takes over another's lease."""
CUTOFF = B + timedelta(hours=1)
"""Week ``A`` ends before it: retirement carries its rows out, then drops it."""
RETIRE_NOW = B + WEEK + timedelta(hours=1)
FINISHED_AT = CUTOFF + timedelta(hours=1)
"""After the cutoff: finished rows are kept, so they are carried, not dropped."""


def claimer(
    engine: Engine, index: int, barrier: threading.Barrier, won: Counter[str], lock: threading.Lock
) -> None:
    inbox, now = Inbox(engine), CLAIMED_AT[index % 2]
    for key in KEYS:
        barrier.wait()
        message = PushMessage(message_id=f"{key}:{index}", publish_time=now, data=b"{}")
        claim = inbox.claim(key, "job", message, now, LEASE)
        if claim is not None:
            with lock:
                won[key] += 1
            assert inbox.finish(claim, Status.DONE, FINISHED_AT)


def retirer(engine: Engine, stop: threading.Event, runs: list[Retired]) -> None:
    while not stop.is_set():
        runs.append(retire(engine, CUTOFF, RETIRE_NOW))


def test_every_key_is_claimed_once_across_a_week_boundary_while_rows_are_carried(
    pg_engine: Engine,
) -> None:
    engine = pg_engine
    make_ahead(engine, A, weeks=2)
    won: Counter[str] = Counter()
    failures: list[BaseException] = []
    barrier, lock, stop, runs = threading.Barrier(THREADS), threading.Lock(), threading.Event(), []

    def guarded(work: Callable[..., None], *args: object) -> None:
        try:
            work(*args)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            barrier.abort()

    claimers = [
        threading.Thread(target=guarded, args=(claimer, engine, n, barrier, won, lock))
        for n in range(THREADS)
    ]
    carrier = threading.Thread(target=guarded, args=(retirer, engine, stop, runs))
    carrier.start()
    for thread in claimers:
        thread.start()
    for thread in claimers:
        thread.join()
    stop.set()
    carrier.join()
    assert not failures, failures
    runs.append(retire(engine, CUTOFF, RETIRE_NOW))

    assert {key: won[key] for key in KEYS} == dict.fromkeys(KEYS, 1)
    with engine.connect() as connection:
        rows = dict(connection.execute(text("SELECT key, count(*) FROM inbox GROUP BY key")).all())
    assert rows == dict.fromkeys(KEYS, 1)
    assert sum(run.carried for run in runs) > 0, "no row was carried: the hammer tested nothing"
    assert any(f"inbox_w{A:%Y%m%d}" in run.dropped for run in runs)
