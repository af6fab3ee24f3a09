"""The three routes of the fault matrix, each run in-process against PostgreSQL through a proxy
that a ``Cutter`` cuts, with its effects counted at a real sink:

- ``sweep``: email jobs swept by ``Sweeper``; an aiosmtpd server counts the Message-IDs.
- ``import``: a CSV in fake-gcs-server imported through the dispatcher (inbox claim, handler,
  finish); the jobs table counts one job per CSV row.
- ``warm``: a release warmed through the dispatcher against real HTTP targets counting hits.

Each route says which cut points apply and how each is hit (``POINTS``), its lease, one
``attempt`` (a sweep, or one delivery of the event as Pub/Sub would redeliver it) and its counts.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Engine, select

from bench.support import smtp_server
from bench.support import storage_plugin as plugin
from bench.support.cuts import Cutter, HookedRecorder, HookedTargets, at_nth, on_statement, sql
from bench.support.job_rows import add_emails, status_counts
from bench.support.storage import Harness, email_csv
from bench.support.tcpproxy import TcpProxy
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.deploy.schema import warm_runs
from consumer.jobs.schema import jobs
from consumer.jobs.sweep import Sweeper, job_lease_seconds
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.storage.handler import StorageHandler
from consumer.storage.reader import ObjectStore
from consumer.wire.envelope import Limits, parse_push, parse_wrapped
from consumer.wire.envelopes_out import deploy_body, storage_body
from consumer.wire.events import DeployEvent
from consumer.wire.outcomes import ACK_STATUSES, STATUS, Outcome
from triggers.local import stack

INBOX_FINISH = sql(b"UPDATE inbox", b" SET status=")
"""The inbox's finish, on the table or (PostgreSQL) on the partition the claim named
(``UPDATE inbox_w20261207 SET status=...``)."""
POINTS = {
    "sweep": {
        "claim": "cut before the sweep starts: its first claim meets it",
        "handler": "cut when the SMTP sink is about to accept email N/2 (mid-batch)",
        "record": "cut when the proxy sees the 2nd batch-done UPDATE of jobs",
    },
    "import": {
        "claim": "cut before the delivery: its inbox claim meets it",
        "handler": "cut when the proxy sees the 2nd INSERT INTO jobs (batches to come)",
        "record": "cut when the proxy sees the 3rd progress UPDATE of processed_files",
        "finish": "cut when the proxy sees the inbox finish UPDATE",
    },
    "warm": {
        "claim": "cut before the delivery: its inbox claim meets it",
        "handler": "cut when the targets see hit N/2",
        "record": "cut when the proxy sees the INSERT INTO warm_runs",
        "finish": "cut when the proxy sees the inbox finish UPDATE",
    },
}


@dataclass(frozen=True)
class Sizes:
    emails: int = 300
    rows: int = 3000
    targets: int = 60
    ack_deadline: int = 15
    """Inbox lease = ack deadline + 2 s margin; the job lease is the default 10 s."""


@dataclass(frozen=True)
class Counts:
    expected: int
    effects: int
    """Effects counted at the sink, repeats included."""
    distinct: int

    @property
    def duplicates(self) -> int:
        return self.effects - self.distinct

    @property
    def lost(self) -> int:
        return self.expected - self.distinct


class Route(Protocol):
    lease_seconds: float

    def arm(self, point: str, cutter: Cutter) -> None: ...
    def attempt(self, deadline: float) -> bool: ...
    def counts(self) -> Counts: ...
    def close(self) -> None: ...


def settings_for(url: str, sizes: Sizes, **changes: object) -> Settings:
    return Settings.of(
        database_url=url, local_mode=True, ack_deadline_seconds=sizes.ack_deadline,
        safety_margin_seconds=2, **changes,
    )  # fmt: skip


def acked(outcome: Outcome) -> bool:
    return STATUS.get(outcome.kind, 503) in ACK_STATUSES


class SweepRoute:
    def __init__(self, proxied: str, direct: Engine, proxy: TcpProxy, sizes: Sizes) -> None:
        self.direct, self.proxy, self.sizes = direct, proxy, sizes
        self.sink = HookedRecorder()
        self.controller = smtp_server.start(self.sink)
        add_emails(direct, sizes.emails)
        self.settings = settings_for(
            proxied, sizes, smtp_host="127.0.0.1", smtp_port=self.sink.port, smtp_security="none"
        )
        self.kinds = build_registry(self.settings).job_kinds
        self.lease_seconds = float(job_lease_seconds(self.settings))

    def arm(self, point: str, cutter: Cutter) -> None:
        if point == "handler":
            self.sink.before = at_nth(cutter, self.sizes.emails // 2)
        elif point == "record":
            done = sql(b"UPDATE jobs SET status=", b"finished_at=", without=b"last_error")
            self.proxy.watch = on_statement(cutter, done, 2)

    def attempt(self, deadline: float) -> bool:
        engine = make_engine(self.settings.database_url)
        try:
            budget = min(deadline, time.monotonic() + self.settings.handler_budget_seconds)
            Sweeper(self.settings, engine, self.kinds).run(budget)
        finally:
            engine.dispose()
        return status_counts(self.direct) == {"done": self.sizes.emails}

    def counts(self) -> Counts:
        sent = self.sink.message_ids()
        return Counts(self.sizes.emails, len(sent), len(set(sent)))

    def close(self) -> None:
        self.controller.stop()


class ImportRoute:
    def __init__(
        self, proxied: str, engine: Engine, direct: Engine, proxy: TcpProxy, sizes: Sizes,
        gcs_url: str,
    ) -> None:  # fmt: skip
        self.direct, self.proxy, self.sizes = direct, proxy, sizes
        bucket = f"matrix-{uuid.uuid4().hex[:12]}"
        stack.storage_client(gcs_url).create_bucket(bucket)
        # Batches of 100 rows, each commit held 0.05 s: an import of a few seconds to cut into.
        rule = {"bucket": bucket, "processor": "slow-import",
                "options": {"delay": 0.05, "batch_rows": 100}}  # fmt: skip
        settings = settings_for(proxied, sizes, storage_rules=json.dumps([rule]))
        registry = Registry()
        plugin.register(registry)  # the handler takes the registry's processors, as plugins do
        objects = ObjectStore(lambda: stack.storage_client(gcs_url))
        handler = registry.storage(StorageHandler(objects, processors=registry.processors))
        self.harness = Harness(gcs_url, settings, engine, handler, bucket)
        self.dispatcher = Dispatcher(settings, engine, registry)
        generation = self.harness.upload("matrix.csv", email_csv(sizes.rows))
        body = storage_body(bucket, "matrix.csv", str(generation), "OBJECT_FINALIZE")
        self.message = parse_push({"Content-Type": "application/json"}, json.dumps(body).encode())
        self.lease_seconds = float(settings.lease_seconds)

    def arm(self, point: str, cutter: Cutter) -> None:
        matches = {
            "handler": (sql(b"INSERT INTO jobs"), 2),
            "record": (sql(b"UPDATE processed_files SET", without=b"SET status="), 3),
            "finish": (INBOX_FINISH, 1),
        }
        if point in matches:
            match, nth = matches[point]
            self.proxy.watch = on_statement(cutter, match, nth)

    def attempt(self, deadline: float) -> bool:
        return acked(self.dispatcher.dispatch(self.message))

    def counts(self) -> Counts:
        with self.direct.connect() as connection:
            keys = list(connection.scalars(select(jobs.c.idempotency_key)))
        return Counts(self.sizes.rows, len(keys), len(set(keys)))

    def close(self) -> None:
        """Nothing runs in the background."""


class WarmRoute:
    def __init__(self, proxied: str, engine: Engine, proxy: TcpProxy, sizes: Sizes) -> None:
        self.proxy, self.sizes = proxy, sizes
        self.sink = HookedTargets(delay=0.02)
        self.sink.start()
        self.urls = self.sink.urls("ok", sizes.targets)
        settings = settings_for(proxied, sizes, warm_targets=tuple(self.urls), warm_retries=0)
        self.dispatcher = Dispatcher(settings, engine, build_registry(settings))
        release = f"matrix-{uuid.uuid4().hex[:8]}"
        message = parse_wrapped(deploy_body("web", release), Limits())
        self.event = DeployEvent(service="web", release=release, message=message)
        self.lease_seconds = float(settings.lease_seconds)

    def arm(self, point: str, cutter: Cutter) -> None:
        if point == "handler":
            self.sink.before = at_nth(cutter, self.sizes.targets // 2)
        elif point == "record":
            self.proxy.watch = on_statement(
                cutter, sql(b"INSERT INTO " + warm_runs.name.encode()), 1
            )
        elif point == "finish":
            self.proxy.watch = on_statement(cutter, INBOX_FINISH, 1)

    def attempt(self, deadline: float) -> bool:
        return acked(self.dispatcher.handle(self.event))

    def counts(self) -> Counts:
        hits = Counter(self.sink.hits_of(self.urls))
        return Counts(len(self.urls), sum(n * c for n, c in hits.items()), len(self.urls) - hits[0])

    def close(self) -> None:
        self.sink.stop()
