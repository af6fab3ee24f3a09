"""The jobs table by epoch hammered across switches on PostgreSQL (migration
``0016_jobs_epochs``; the rules one at a time: ``test_epoch_keys``): writers enqueue the same
keys through every producer while a switcher moves the epoch on, each key first racing a switch
and then again after it; debounced enqueues race the switches with a watcher looking for two
pending jobs of one key; sweepers work off jobs spread over several epochs."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs import epochs
from consumer.jobs.model import Debounce
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds
from tests.jobs.epoch_hammering import HOLD, SWITCH_WITHIN, TWO_PENDING, Threads, switch_soon
from tests.jobs.epoch_producers import (
    KIND,
    current_epoch,
    declared,
    enqueued,
    producers,
    rows_by_key,
    switched,
)
from tests.jobs.test_flow import Recorder, done_count, kinds_of

pytestmark = pytest.mark.postgres
SWITCHES = 4
KEYS = 40
"""Keys of one round: at least ``COPY_FROM``, so the ``copy`` writer copies them."""
SLICE = 8
"""Keys a writer enqueues at each step of a round: under ``COPY_FROM``, so ``few`` inserts them
in one multi-row ``INSERT``."""


@pytest.fixture
def db(postgres_url: str, kinds: JobKinds) -> Iterator[Engine]:
    engine = make_engine(postgres_url, pool_size=12)
    declared(engine, kinds, postgres_url)
    yield engine
    engine.dispose()


class KeyRounds:
    """The producer hammer's writers, one per producer, in lockstep with the switcher: at each
    step of a round every writer enqueues the step's slice of keys after a random wait under
    ``HOLD`` (``copy``: the whole round's, at the switching step only), and at the switching
    step the switcher moves the epoch on after such a wait too. Some writers then hold a key
    uncommitted when the switch comes, and others ask for it just after."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.names = list(producers())
        self.barrier = threading.Barrier(len(self.names) + 1, timeout=SWITCH_WITHIN)
        self.reported: dict[str, set[int]] = defaultdict(set)
        self.lock = threading.Lock()

    def race(self, keys: list[str], switching: int) -> None:
        threads = Threads()
        threads.start(lambda: self.switch(len(keys) // SLICE, switching))
        for name in self.names:
            threads.start(lambda name=name: self.write(name, keys, switching))  # type: ignore[misc]
        threads.join()

    def again(self, keys: list[str]) -> None:
        threads = Threads()
        for name in self.names:
            threads.start(lambda name=name: self.enqueue(name, keys))  # type: ignore[misc]
        threads.join()

    def switch(self, steps: int, switching: int) -> None:
        for step in range(steps):
            self.barrier.wait()
            if step == switching:
                switch_soon(self.engine, 0, HOLD)

    def write(self, name: str, keys: list[str], switching: int) -> None:
        try:
            self.steps(name, keys, switching)
        except BaseException:
            self.barrier.abort()  # the others stop at once
            raise

    def steps(self, name: str, keys: list[str], switching: int) -> None:
        for step in range(len(keys) // SLICE):
            self.barrier.wait()
            if name != "copy":
                time.sleep(random.uniform(0, HOLD))
                self.enqueue(name, keys[step * SLICE : (step + 1) * SLICE])
            elif step == switching:
                time.sleep(random.uniform(0, HOLD))
                self.enqueue(name, keys)

    def enqueue(self, name: str, keys: list[str]) -> None:
        """Every writer gives its keys in one order: two transactions never wait for each other
        both ways (a deadlock the epochs have nothing to do with)."""
        result = enqueued(name, producers(HOLD)[name], self.engine, keys)
        with self.lock:
            for key, job_id in result.ids.items():
                if job_id is not None:
                    self.reported[key].add(job_id)


def test_keys_enqueued_by_every_producer_across_switches_have_one_row_each(db: Engine) -> None:
    """Each round: the writers race a switch over the round's keys (``KeyRounds``), then
    enqueue them once more with the previous round's, after it. Every key ends with one row,
    and every id reported for a key is that row's."""
    first_epoch = current_epoch(db)
    rounds = [[f"r{r}:{n:02}" for n in range(KEYS)] for r in range(SWITCHES)]
    writers = KeyRounds(db)
    for r, keys in enumerate(rounds):
        assert epochs.make_next(db) is not None  # ahead, as the cleanup makes it
        writers.race(keys, switching=random.randrange(KEYS // SLICE))
        writers.again([*rounds[r - 1], *keys] if r else keys)
    assert current_epoch(db) == first_epoch + SWITCHES
    rows = rows_by_key(db)
    assert sorted(rows) == sorted(itertools.chain(*rounds))
    duplicated = {key: found for key, found in rows.items() if len(found) > 1}
    assert duplicated == {}, f"{len(duplicated)} keys with more than one row"
    reported = writers.reported
    assert {key: ids for key, ids in reported.items() if ids != {rows[key][0][0]}} == {}
    for r, keys in enumerate(rounds):  # before its round's switch or after it, nowhere else
        landed = {rows[key][0][1] - first_epoch for key in keys}
        assert landed <= {r, r + 1}, (r, landed)


DEBOUNCE_KEYS = 4


def test_debounced_enqueues_across_switches_never_make_two_pending_jobs(db: Engine) -> None:
    """Debounced enqueues, alone and inside held transactions, while the epoch moves on
    ``SWITCHES`` times; each phase's keys are first enqueued just before a switch and folded
    into after it. A watcher never sees two pending jobs of a key, and every enqueue of a key
    reports the same job (none runs, so a key's first job takes every later enqueue)."""
    store = JobStore(db)
    reported: dict[str, set[int]] = defaultdict(set)
    seen: list[str] = []
    phase = [0]
    stop = threading.Event()

    def enqueue(key: str, n: int, held: bool) -> None:
        new = NewJob(KIND, {"n": n}, debounce=Debounce(key, quiet=600, max_wait=3600))
        if held:
            with db.begin() as connection:
                result = store.enqueue(new, allow_unknown=True, connection=connection)
                time.sleep(HOLD)
        else:
            result = store.enqueue(new, allow_unknown=True)
        assert result.job_id is not None
        reported[key].add(result.job_id)

    def writer(held: bool) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            enqueue(f"p{phase[0]}:d{n % DEBOUNCE_KEYS}", n, held)

    def watch() -> None:
        while not stop.is_set():
            with db.connect() as connection:
                seen.extend(connection.execute(TWO_PENDING).scalars())

    threads = Threads()
    for held in (True, True, True, False):
        threads.start(lambda held=held: writer(held))  # type: ignore[misc]
    threads.start(watch)
    try:
        for next_phase in range(1, SWITCHES + 1):
            time.sleep(3 * HOLD)  # the previous phase's keys folded into after its switch
            phase[0] = next_phase
            switch_soon(db, 0, HOLD / 2)
        time.sleep(3 * HOLD)
    finally:
        stop.set()
        threads.join()
    with db.connect() as connection:
        seen.extend(connection.execute(TWO_PENDING).scalars())
    assert seen == []
    assert {key: ids for key, ids in reported.items() if len(ids) != 1} == {}
    assert len({key.split(":")[0] for key in reported}) > SWITCHES // 2


LOCK_KEYS, PER_KEY, UNLOCKED = 3, 8, 40
SWEEPERS = 4


def test_jobs_spread_over_epochs_run_once_and_lock_keys_one_at_a_time_in_order(
    db: Engine, postgres_url: str
) -> None:
    """Each epoch gets unkeyed jobs and the next jobs of every lock key; concurrent sweepers
    then run every job exactly once, and a lock key's jobs never two at once, in id order,
    though its earlier jobs sit in earlier partitions."""
    for epoch in range(SWITCHES):
        new_jobs = [NewJob("call", {"epoch": epoch}) for _ in range(UNLOCKED // SWITCHES)]
        new_jobs += [
            NewJob("call", {"lock": f"k{k}"}, lock_key=f"k{k}")
            for k in range(LOCK_KEYS)
            for _ in range(PER_KEY // SWITCHES)
        ]
        with db.begin() as connection:
            enqueue_many(connection, new_jobs, allow_unknown=True)
        switched(db)
    total = SWITCHES * (UNLOCKED // SWITCHES + LOCK_KEYS * (PER_KEY // SWITCHES))
    with db.connect() as connection:
        spread = connection.execute(select(func.count(func.distinct(jobs.c.lock_key)))).scalar()
    assert spread == LOCK_KEYS
    recorder = Recorder(hold=0.01)
    settings = Settings.of(database_url=postgres_url, local_mode=True, sweep_batch_size=5)
    until = time.monotonic() + 40

    def sweep() -> None:
        while time.monotonic() < until and done_count(db) < total:
            Sweeper(settings, db, kinds_of(recorder)).run(until)

    threads = Threads()
    for _ in range(SWEEPERS):
        threads.start(sweep)
    threads.join()
    ran = [job.id for _, _, job in recorder.calls]
    assert sorted(ran) == sorted(set(ran)) and len(ran) == total
    by_key: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for start, end, job in sorted(recorder.calls, key=lambda call: call[0]):
        if isinstance(job.payload, dict) and "lock" in job.payload:
            by_key[job.payload["lock"]].append((start, end, job.id))
    assert len(by_key) == LOCK_KEYS
    for calls in by_key.values():
        assert [job_id for *_, job_id in calls] == sorted(job_id for *_, job_id in calls)
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(calls)), "ran at once"
