"""The Cloud Scheduler stand-in: a ``sweep`` tick every few seconds, each published twice (two
messageIds, one slot), as Scheduler's rare double runs and retries produce.

Through Google's Pub/Sub emulator when it is installed (a topic with a push subscription to the
balancer: the emulator pushes and redelivers whatever is nacked), otherwise by posting the same
wire-format envelopes itself and, like Pub/Sub, redelivering each until it is acknowledged.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Protocol

import requests

from consumer.demo.processes import Child, free_port, start_pubsub
from consumer.ticks.stand_in import Pace, Schedule, run_rounds
from consumer.wire.envelopes_out import tick_body

PROJECT = "demo"
COPIES_PER_TICK = 2


class TickSource(Protocol):
    name: str

    def publish_round(self) -> None: ...

    def close(self) -> None: ...


class DirectTicks:
    """Posts wrapped push bodies to the balancer; a message is retried every second until 2xx."""

    name = "direct (no Pub/Sub emulator: the demo posts Pub/Sub's wire format itself)"

    def __init__(self, push_url: str) -> None:
        self.push_url = push_url
        self._stopping = threading.Event()

    def publish_round(self) -> None:
        for _ in range(COPIES_PER_TICK):
            body = tick_body("sweep")
            threading.Thread(target=self._deliver, args=(body,), daemon=True).start()

    def _deliver(self, body: dict[str, Any]) -> None:
        while not self._stopping.is_set():
            try:
                if requests.post(self.push_url, json=body, timeout=120).ok:
                    return
            except requests.RequestException:
                pass
            self._stopping.wait(1.0)

    def close(self) -> None:
        self._stopping.set()


class EmulatorTicks:
    """A topic on Google's Pub/Sub emulator with a push subscription to the balancer."""

    name = "Google's Pub/Sub emulator (real push deliveries and redeliveries)"

    def __init__(self, push_url: str, ack_deadline: int, workdir: Path) -> None:
        self.port = free_port()
        self.child: Child = start_pubsub(self.port, workdir / "pubsub.log", PROJECT, _env())
        self.topic = f"projects/{PROJECT}/topics/ticks"
        self._create(push_url, ack_deadline)

    def _create(self, push_url: str, ack_deadline: int) -> None:
        base = f"http://127.0.0.1:{self.port}/v1"
        requests.put(f"{base}/{self.topic}", json={}, timeout=30).raise_for_status()
        subscription: dict[str, Any] = {
            "topic": self.topic,
            "pushConfig": {"pushEndpoint": push_url},
            "ackDeadlineSeconds": ack_deadline,
        }
        url = f"{base}/projects/{PROJECT}/subscriptions/ticks-push"
        requests.put(url, json=subscription, timeout=30).raise_for_status()

    def publish_round(self) -> None:
        message = {"attributes": {"task": "sweep"}}
        body = json.dumps({"messages": [message] * COPIES_PER_TICK})
        url = f"http://127.0.0.1:{self.port}/v1/{self.topic}:publish"
        requests.post(url, data=body, timeout=30).raise_for_status()

    def close(self) -> None:
        self.child.stop()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "JAVA_TOOL_OPTIONS": "-Xmx512m"}


class Ticker:
    """Publishes a round every ``every`` seconds on a thread until ``stop()``, the first at once,
    each an interval after the last one started."""

    def __init__(self, source: TickSource, every: float) -> None:
        self.source = source
        self.schedule = Schedule(every, Pace.RATE, first_now=True)
        self.rounds = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-ticker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        run_rounds(self.schedule, self._publish, self._stopping)

    def _publish(self) -> None:
        try:
            self.source.publish_round()
            self.rounds += 1
        except Exception as exc:  # a missed round, as Scheduler may miss one
            print(f"tick round failed: {exc}", file=sys.stderr)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
