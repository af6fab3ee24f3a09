"""Google's Pub/Sub emulator and fake-gcs-server for the chaos run, started with the local
stack's helpers: topics for ticks, jobs and storage notifications, each with a push subscription
to the balancer (the emulator pushes and redelivers what is not acknowledged), and a bucket whose
uploads fake-gcs-server announces on the storage topic."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from triggers.local import stack

PROJECT = "chaos"
TICKS, JOBS, STORAGE = "ticks", "jobs", "gcs-notifications"


@dataclass(frozen=True)
class Emulators:
    pubsub_host: str
    gcs_url: str

    def publish(self, topic: str, messages: list[dict[str, Any]]) -> None:
        """Publish through the emulator's REST API (``{"attributes": ..., "data": b64}``)."""
        url = f"http://{self.pubsub_host}/v1/projects/{PROJECT}/topics/{topic}:publish"
        body = json.dumps({"messages": messages})
        requests.post(url, data=body, timeout=30).raise_for_status()

    def bucket(self, name: str) -> Any:
        return stack.storage_client(self.gcs_url).bucket(name)


@contextmanager
def emulators(workdir: Path, push_url: str, ack_deadline: int, bucket: str) -> Iterator[Emulators]:
    """Both emulators, wired to ``push_url``; stopped (by process group) when the block ends."""
    if problem := stack.missing():
        raise RuntimeError(problem)
    with ExitStack() as stop:
        pubsub_port, gcs_port = stack.free_port(), stack.free_port()
        pubsub = stack.start_pubsub(pubsub_port, workdir / "pubsub.log", PROJECT)
        stop.callback(pubsub.stop)
        host = f"127.0.0.1:{pubsub_port}"
        for topic in (TICKS, JOBS, STORAGE):
            stack.ensure_topic(host, PROJECT, topic)
            stack.ensure_push_subscription(
                host, PROJECT, f"{topic}-push", topic, push_url, ack_deadline
            )
        gcs = stack.start_fake_gcs(gcs_port, workdir / "gcs", workdir / "gcs.log", host,
                                   PROJECT, STORAGE, events="finalize")  # fmt: skip
        stop.callback(gcs.stop)
        gcs_url = f"http://127.0.0.1:{gcs_port}"
        stack.ensure_bucket(gcs_url, bucket)
        yield Emulators(host, gcs_url)
