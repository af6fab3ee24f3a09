"""The inbox is partitioned while deliveries go on (``0015_inbox_partitions`` applied to a
PostgreSQL database at ``0014_inbox_placed``, as a release's migration job would while the pods
on the new code push): every key still takes effect exactly once, no row is lost, and the keys
recorded before the swap still refuse a redelivery placed in a later week's partition."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from bench.support.postgres import migrated_postgres_database
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.errors import Unavailable
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow
from tests.conftest import PG_ADMIN_DSN

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=60)
PUSHERS = 4
LIVE_KEYS = 600
"""Each pusher delivers every live key, in its own order: four copies of each, racing."""
BEFORE = 300
FAILED_BEFORE = 20


class Ledger:
    """What the deliveries did: effects per key, and the faults they met and retried."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.effects: Counter[str] = Counter()
        self.faults: list[str] = []
        self.deliveries = 0
        self.during = 0
        self.migrating = threading.Event()

    def effect(self, key: str) -> None:
        with self.lock:
            self.effects[key] += 1

    def delivered(self) -> None:
        with self.lock:
            self.deliveries += 1
            self.during += self.migrating.is_set()


def deliver(inbox: Inbox, key: str, ledger: Ledger, now_shift: timedelta = timedelta()) -> None:
    """One delivery as the pipeline makes it: claim, the handler's effect, finish; a database
    fault before the claim committed is redelivered (Pub/Sub would), one after it retries the
    finish (the claim is ours)."""
    message = PushMessage(message_id=key, publish_time=utcnow(), data=b"{}")
    while True:
        try:
            claim = inbox.claim(key, "job", message, utcnow() + now_shift, LEASE)
            break
        except Exception as exc:
            ledger.faults.append(f"claim {key}: {type(exc).__name__}")
            time.sleep(0.05)
    if claim is not None:
        ledger.effect(key)
        while True:
            try:
                assert inbox.finish(claim, Status.DONE, utcnow() + now_shift)
                break
            except AssertionError:
                raise
            except Exception as exc:
                ledger.faults.append(f"finish {key}: {type(exc).__name__}")
                time.sleep(0.05)
    ledger.delivered()


def pusher(engine: Engine, keys: list[str], ledger: Ledger) -> None:
    """A pod's worker: a kept connection in autocommit, so claims and finishes take the
    prepared, straight-to-libpq path the pods take, across the swap."""
    with engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        inbox = Inbox(engine, connection)
        for key in keys:
            deliver(inbox, key, ledger)
            time.sleep(0.002)


@pytest.fixture
def at_0014() -> Iterator[str]:
    with migrated_postgres_database(PG_ADMIN_DSN, revision="0014_inbox_placed") as url:
        yield url


def test_partitioning_a_live_inbox_keeps_every_key_once(at_0014: str) -> None:
    engine = make_engine(at_0014, pool_size=PUSHERS + 2)
    inbox, ledger = Inbox(engine), Ledger()
    before = [f"before-{n}" for n in range(BEFORE)]
    for key in before:
        deliver(inbox, key, ledger)
    failed = [f"failed-{n}" for n in range(FAILED_BEFORE)]
    for key in failed:
        claim = inbox.claim(key, "job", PushMessage(key, utcnow(), b"{}"), utcnow(), LEASE)
        assert claim is not None and inbox.finish(claim, Status.FAILED, utcnow(), error="retry")

    live = [f"live-{n}" for n in range(LIVE_KEYS)]
    orders = [random.Random(seed).sample(live, len(live)) for seed in range(PUSHERS)]
    threads = [threading.Thread(target=pusher, args=(engine, o, ledger)) for o in orders]
    for thread in threads:
        thread.start()
    while ledger.deliveries < BEFORE + PUSHERS * LIVE_KEYS // 8:
        time.sleep(0.01)
    ledger.migrating.set()
    upgrade(at_0014)
    ledger.migrating.clear()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)

    # Redeliveries in the week after next: placed there, they must still find the old rows.
    later = timedelta(days=14)
    for key in before + failed + live:
        deliver(inbox, key, ledger, now_shift=later)

    assert ledger.during > 0, "no delivery ran while the migration applied"
    expected = Counter({key: 1 for key in before + failed + live})
    assert ledger.effects == expected
    with engine.connect() as connection:
        kind = connection.execute(
            text("SELECT relkind FROM pg_class WHERE oid = 'inbox'::regclass")
        ).scalar_one()
        rows = dict(
            connection.execute(text("SELECT status, count(*) FROM inbox GROUP BY status")).all()
        )
        repeated = connection.execute(
            text("SELECT key FROM inbox GROUP BY key HAVING count(*) > 1")
        ).all()
        partitions = connection.execute(
            text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'inbox'::regclass")
        ).scalar_one()
    engine.dispose()
    assert kind == "p" and partitions == 6  # legacy, four weeks, default
    assert repeated == []
    assert rows == {"done": BEFORE + FAILED_BEFORE + LIVE_KEYS}
    print(
        f"deliveries {ledger.deliveries}, {ledger.during} while migrating; "
        f"faults retried: {len(ledger.faults)} {Counter(f.split(':')[0] for f in ledger.faults)}"
    )


def test_the_claim_refuses_to_run_under_repeatable_read(pg_engine: Engine) -> None:
    """Its lookup must see what the key lock's last holder committed, which a transaction's
    first snapshot does not: a duplicate in another week's partition would follow."""
    message = PushMessage(message_id="m", publish_time=utcnow(), data=b"{}")
    with pg_engine.connect() as connection:
        connection.execution_options(isolation_level="REPEATABLE READ")
        with pytest.raises(Unavailable) as refused:  # a 503: the message waits for the fix
            Inbox(pg_engine).claim("k", "job", message, utcnow(), LEASE, connection=connection)
    assert "READ COMMITTED only" in str(refused.value.__cause__)
    assert Inbox(pg_engine).claim("k", "job", message, utcnow(), LEASE) is not None


def test_an_empty_inbox_is_dropped_and_the_weeks_start_with_the_current_one(
    pg_engine: Engine,
) -> None:
    """A fresh install: no ``inbox_legacy`` (whose copy of the old primary key every push would
    have kept up for its first week), and this week's claims land in this week's partition."""
    with pg_engine.connect() as connection:
        members = (
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'inbox'::regclass"
        )
        names = connection.execute(text(members)).scalars().all()
        this_week = connection.execute(text("SELECT consumer_inbox_week(now())")).scalar_one()
    weeks = [f"inbox_w{this_week + timedelta(days=7 * n):%Y%m%d}" for n in range(5)]
    assert sorted(names) == sorted([*weeks, "inbox_default"])
    message = PushMessage(message_id="m", publish_time=utcnow(), data=b"{}")
    claim = Inbox(pg_engine).claim("fresh", "job", message, utcnow(), LEASE)
    assert claim is not None and claim.stored_in == weeks[0]
