"""The chaos run's workload, published once a second until the run's time is up, and remembered
so the ledger can ask what became of each piece:

- a ``sweep`` tick (Cloud Scheduler's, through the emulator);
- a small CSV of email rows uploaded to fake-gcs-server (its notification imports one job a row);
- email and ``call`` jobs published on the jobs topic (``job_kind``, ``job_key``);
- every few seconds a deploy of ``web``, announced by a signed ``POST /hooks/deploy`` to a live
  pod and repeated, like a CI step, until one answers 2xx (the deploy target is then called).
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field

import requests

from bench.chaos.emulators import JOBS, TICKS, Emulators
from bench.chaos.pods import BUCKET, CALL_KIND, DEPLOY_SERVICE, HOOK_SECRET, MAIL_PREFIX
from consumer.auth.signature import signed_headers
from consumer.wire.events import PRODUCER_NAMESPACE

HOOK_RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Rates:
    """What one second of load publishes."""

    csv_rows: int = 3
    mail_jobs: int = 1
    call_jobs: int = 1
    deploy_every: int = 5


@dataclass(frozen=True)
class Upload:
    name: str
    generation: int
    rows: int


@dataclass(frozen=True)
class Tick:
    """One tick published: the emulator stamps its ``publishTime`` (whose second is the tick's
    slot) between ``sent`` and ``answered``."""

    sent: float
    answered: float
    draining: bool = False
    """Published after the load stopped (the scheduler goes on while the run drains)."""


@dataclass
class Published:
    """Everything the load asked for (the ledger's expectations)."""

    ticks: list[Tick] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)
    mail_jobs: list[str] = field(default_factory=list)
    call_jobs: list[str] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    hooks_acknowledged: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Load:
    """``start()``, then ``stop()`` once the run is over; hooks keep retrying until ``close()``."""

    def __init__(self, emulators: Emulators, live_ports: Callable[[], list[int]],
                 rates: Rates) -> None:  # fmt: skip
        self.emulators, self.live_ports, self.rates = emulators, live_ports, rates
        self.published = Published()
        self._stopping = threading.Event()
        self._closing = threading.Event()
        self._hooks: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)
        self._ticker = threading.Thread(target=self._tick, name="chaos-ticks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No new work from now on; the ticks go on (a scheduler does not stop), so jobs a
        killed pod held are still taken over while the run drains."""
        self._stopping.set()
        self._thread.join(timeout=60)
        self._ticker.start()

    def hooks_pending(self) -> int:
        return sum(thread.is_alive() for thread in self._hooks)

    def close(self) -> None:
        if not self._stopping.is_set():
            self.stop()
        self._closing.set()
        for thread in [self._ticker, *self._hooks]:
            if thread.is_alive():
                thread.join(timeout=10)

    def _tick(self) -> None:
        while not self._closing.wait(1.0):
            with suppress(Exception):  # a missed tick, as Scheduler may miss one
                self._publish_tick()

    def _publish_tick(self) -> None:
        sent = time.time()
        self.emulators.publish(TICKS, [{"attributes": {"task": "sweep"}}])
        tick = Tick(sent, time.time(), draining=self._stopping.is_set())
        with self.published.lock:
            self.published.ticks.append(tick)

    def _run(self) -> None:
        second = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self._one_second(second)
            except Exception as exc:  # noted; the ledger reports it, the load goes on
                with self.published.lock:
                    self.published.errors.append(f"{type(exc).__name__}: {exc}")
            second += 1
            self._stopping.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def _one_second(self, second: int) -> None:
        self._publish_tick()
        self._upload(second)
        self._publish_jobs(second)
        if second % self.rates.deploy_every == 0:
            self._announce(f"r{second // self.rates.deploy_every}")

    def _upload(self, second: int) -> None:
        rows = self.rates.csv_rows
        if not rows:
            return
        name = f"{MAIL_PREFIX}u{second}.csv"
        lines = ["to,subject,text"]
        lines += [f"u{second}r{row}@example.com,Upload {second},Row {row}" for row in range(rows)]
        blob = self.emulators.bucket(BUCKET).blob(name)
        blob.upload_from_string("\n".join(lines) + "\n", content_type="text/csv")
        with self.published.lock:
            self.published.uploads.append(Upload(name, int(blob.generation), rows))

    def _publish_jobs(self, second: int) -> None:
        messages, mail, calls = [], [], []
        for n in range(self.rates.mail_jobs):
            key = f"mail-{second}-{n}"
            payload = {"to": f"{key}@example.com", "subject": "Chaos", "text": "Hello."}
            messages.append(_job_message("email", key, payload))
            mail.append(PRODUCER_NAMESPACE + key)  # the job's key: a producer's namespace
        for n in range(self.rates.call_jobs):
            key = f"call-{second}-{n}"
            messages.append(_job_message(CALL_KIND, key, {"n": n}))
            calls.append(PRODUCER_NAMESPACE + key)
        if messages:
            self.emulators.publish(JOBS, messages)
        with self.published.lock:
            self.published.mail_jobs += mail
            self.published.call_jobs += calls

    def _announce(self, release: str) -> None:
        with self.published.lock:
            self.published.releases.append(release)
        thread = threading.Thread(target=self._hook, args=(release,), daemon=True)
        self._hooks.append(thread)
        thread.start()

    def _hook(self, release: str) -> None:
        """Like a CI step: sign and POST to a live pod until one answers 2xx."""
        body = json.dumps({"service": DEPLOY_SERVICE, "release": release}).encode()
        while not self._closing.is_set():
            ports = self.live_ports()
            if ports and _post_hook(random.choice(ports), body):
                with self.published.lock:
                    self.published.hooks_acknowledged += 1
                return
            self._closing.wait(HOOK_RETRY_SECONDS)


def _job_message(kind: str, key: str, payload: Mapping[str, object]) -> dict[str, object]:
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    return {"attributes": {"job_kind": kind, "job_key": key}, "data": data}


def _post_hook(port: int, body: bytes) -> bool:
    headers = {"Content-Type": "application/json",
               **signed_headers(HOOK_SECRET, int(time.time()), body)}  # fmt: skip
    try:
        answer = requests.post(f"http://127.0.0.1:{port}/hooks/deploy", data=body,
                               headers=headers, timeout=15)  # fmt: skip
    except requests.RequestException:
        return False
    return 200 <= answer.status_code < 300
