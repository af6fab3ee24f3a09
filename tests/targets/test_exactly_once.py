"""Exactly once through HTTP targets, all real processes: three consumer gunicorn servers on one
PostgreSQL database, a Node.js target that fails a share of calls (500, 429, resets, stalls past
the timeout, and "lost" answers: its effect done, the connection reset before the 2xx), every
delivery sent twice, nacks redelivered as Pub/Sub would, and one server SIGKILLed mid-run.

Every key ends with exactly one call the target answered with its effect; every repeat the
consumer could not prevent (a lost answer, the killed server's calls) carries the same key and is
dropped by the target; 4xx answers end ``dead`` and replay once the target accepts them.
The test sends 1,000 events (100 ticks, 560 storage events, 140 deploys, 200 jobs), each
delivered twice."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from datetime import timedelta
from typing import Any

import pytest
import requests
from sqlalchemy import Engine, select

from bench.support.target_servers import NodeTarget
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.demo.processes import descendants
from consumer.inbox.schema import inbox
from consumer.jobs.model import NewJob
from consumer.jobs.schema import jobs
from consumer.jobs.store import enqueue_many
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.wire.envelopes_out import deploy_body, storage_body, tick_body
from consumer.wire.timeutil import utcnow
from tests.conftest import Server

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ACKED = {102, 200, 201, 202, 204}
TASKS, SLOTS = 4, 25  # 100 ticks: each task's slots in order, so none goes stale
STORAGE, REJECTED, DEPLOYS, JOBS = 550, 10, 140, 200
FAILURES = {"500": 0.06, "429": 0.04, "reset": 0.04, "stall": 0.02, "lost": 0.05}
SECRET = "target-secret-0123456789"


def targets(url: str) -> str:
    hmac = {"type": "hmac", "secrets": [SECRET]}
    declared = [
        {"name": f"tick-{n}", "url": f"{url}/tick", "auth": {"type": "none"},
         "serves": {"tick": f"orders-{n}", "period_seconds": 60}, "timeout_seconds": 1}
        for n in range(TASKS)
    ]  # fmt: skip
    declared += [
        {"name": "uploads", "url": f"{url}/storage", "auth": hmac, "timeout_seconds": 1,
         "serves": {"storage": "uploads", "prefix": "orders/"}},
        {"name": "deploys", "url": f"{url}/deploy", "auth": hmac, "timeout_seconds": 1,
         "serves": {"deploy": "orders"}},
        {"name": "jobs", "url": f"{url}/job", "auth": {"type": "none"}, "timeout_seconds": 1,
         "serves": {"job_kind": "process-order"}, "concurrency": 2},
    ]  # fmt: skip
    return json.dumps(declared)


def env_for(database_url: str, target_url: str) -> dict[str, str]:
    return {
        "CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_LOG_LEVEL": "ERROR", "CONSUMER_ACK_DEADLINE_SECONDS": "10",
        "CONSUMER_SAFETY_MARGIN_SECONDS": "2", "CONSUMER_MAX_ATTEMPTS": "100",
        "CONSUMER_TICK_MAX_AGE_PERIODS": "1000", "CONSUMER_TICK_PERIODS": "sweep=1",
        "CONSUMER_JOB_RETRY_BASE_SECONDS": "0", "CONSUMER_JOB_RETRY_MAX_SECONDS": "1",
        "CONSUMER_JOB_MAX_ATTEMPTS": "100", "CONSUMER_JOB_LEASE_SECONDS": "5",
        "CONSUMER_HTTP_TARGETS": targets(target_url),
    }  # fmt: skip


class PubSub:
    """Pushes like Pub/Sub: to any live server, again until one acknowledges."""

    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self.dead: set[int] = set()
        self.turn = 0

    def deliver(self, body: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            self.turn += 1
            live = [s for i, s in enumerate(self.servers) if i not in self.dead]
            server = live[self.turn % len(live)]
            with suppress(requests.RequestException):
                response = requests.post(f"{server.url}/push", json=body, timeout=15)
                if response.status_code in ACKED:
                    return dict(response.json())
            time.sleep(0.2)
        raise AssertionError(f"never acknowledged: {body['message']['attributes']}")

    def twice(self, body: dict[str, Any]) -> None:
        """A duplicated delivery: both copies pushed at once."""
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(self.deliver, [body, body]))


def events() -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Ticks as one ordered stream per task (as Cloud Scheduler sends them), and the rest."""
    now = utcnow()
    ticks = [
        [tick_body(f"orders-{n}", now - timedelta(minutes=SLOTS - s)) for s in range(SLOTS)]
        for n in range(TASKS)
    ]
    rest = [storage_body("uploads", f"orders/{i}.json", str(1000 + i)) for i in range(STORAGE)]
    rest += [storage_body("uploads", f"orders/reject-me-{i}", "7") for i in range(REJECTED)]
    rest += [deploy_body("orders", f"r{i}") for i in range(DEPLOYS)]
    return ticks, rest


def sweep_until_done(pubsub: PubSub, engine: Engine, stop: threading.Event) -> None:
    while not stop.is_set() and pending_jobs(engine):
        with suppress(AssertionError):
            pubsub.deliver(tick_body("sweep", utcnow()))
        time.sleep(1)


def pending_jobs(engine: Engine) -> int:
    with engine.connect() as connection:
        rows = connection.execute(select(jobs.c.status)).scalars()
        return sum(1 for status in rows if status not in ("done", "dead"))


def kill(server: Server) -> None:
    """A crash: the master and its workers, at once."""
    for pid in [server.process.pid, *descendants(server.process.pid)]:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    server.process.wait()


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def test_every_key_takes_effect_once_through_three_servers_and_a_crash(
    postgres_url: str, engine: Engine, node_target: NodeTarget, start_server: Callable[..., Server]
) -> None:
    started = time.monotonic()
    node_target.control(fail=FAILURES, stall_ms=1500, retry_after=0, reject="reject-me")
    env = env_for(postgres_url, node_target.url)
    servers = [start_server(env, workers=2) for _ in range(3)]
    pubsub = PubSub(servers)
    with engine.begin() as connection:
        new = [NewJob("process-order", {"order": i}, key=f"order-{i}") for i in range(JOBS)]
        enqueue_many(connection, new, allow_unknown=True)
    ticks, rest = events()
    stop = threading.Event()
    sweeper = threading.Thread(target=sweep_until_done, args=(pubsub, engine, stop))
    sweeper.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            streams = [pool.submit(lambda s=s: [pubsub.twice(b) for b in s]) for s in ticks]
            done = [pool.submit(pubsub.twice, body) for body in rest]
            while sum(f.done() for f in done) < len(rest) // 3:
                time.sleep(0.05)
            kill(servers[1])
            pubsub.dead.add(1)
            for future in [*streams, *done]:
                future.result()
        sweeper.join(timeout=90)
    finally:
        stop.set()
    assert not sweeper.is_alive() and pending_jobs(engine) == 0
    check_exactly_once(node_target, engine, ticks, rest)
    check_rejected_replay(node_target, engine, postgres_url)
    assert time.monotonic() - started < 120


def check_exactly_once(
    target: NodeTarget, engine: Engine, ticks: list[list[dict[str, Any]]], rest: list[Any]
) -> None:
    calls = target.calls()
    effects = Counter(call["key"] for call in calls if call["outcome"] in ("done", "lost"))
    repeats = Counter(call["key"] for call in calls if call["outcome"] == "duplicate")
    assert set(effects.values()) == {1}, [k for k, n in effects.items() if n > 1][:5]
    assert set(repeats) <= set(effects), "a repeat without a first effect"
    assert repeats, "no answer was lost: the test proved nothing about the key"
    with engine.connect() as connection:
        rows = dict(connection.execute(select(inbox.c.key, inbox.c.status)).all())
        job_rows = dict(connection.execute(select(jobs.c.idempotency_key, jobs.c.status)).all())
    events_total = TASKS * SLOTS + len(rest) - REJECTED
    mine = {key: status for key, status in rows.items() if not key.startswith("tick:sweep:")}
    assert Counter(mine.values()) == {"done": events_total, "dead": REJECTED}
    assert Counter(job_rows.values()) == {"done": JOBS}
    quoted = {json.dumps(key) for key in [*mine, *job_rows]}  # a key is its sf-string
    done_keys = {json.dumps(k) for k, s in [*mine.items(), *job_rows.items()] if s == "done"}
    assert set(effects) == done_keys and len(quoted) == len(mine) + len(job_rows)


def check_rejected_replay(target: NodeTarget, engine: Engine, database_url: str) -> None:
    """A 4xx is dead, not lost: once the target accepts it, the operator's replay runs it."""
    target.control(reject="", fail={})
    settings = Settings.from_env(env_for(database_url, target.url))
    service = Service.of(settings, engine)
    with engine.connect() as connection:
        dead = connection.execute(select(inbox.c.key).where(inbox.c.status == "dead")).scalars()
        keys = list(dead)
    assert [replayed(service, key) for key in keys] == ["done"] * REJECTED


def replayed(service: Service, key: str, tries: int = 3) -> str:
    """The replay's outcome; one that timed out (a call's whole exchange is bounded by the
    target's 1 s, which a loaded machine can miss) is replayed again, as an operator would: the
    target's Idempotency-Key keeps a repeat one effect."""
    outcome = replay(service, key).kind.value
    while outcome == "retry" and tries > 1:
        outcome, tries = replay(service, key).kind.value, tries - 1
    return outcome
