"""A local stand-in for Cloud Scheduler: publishes ``sweep`` and ``cleanup`` ticks over HTTP."""

from __future__ import annotations

import logging
import threading

import requests

from consumer.wire.envelopes_out import tick_body

log = logging.getLogger("consumer.ticker")
LOCAL_TASKS = ("sweep", "cleanup")


class LocalTicker:
    def __init__(self, url: str, interval_seconds: int, tasks: tuple[str, ...] = LOCAL_TASKS):
        self.url = url
        self.interval = interval_seconds
        self.tasks = tasks
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            for task in self.tasks:
                self.tick(task)

    def tick(self, task: str) -> None:
        try:
            response = requests.post(self.url, json=tick_body(task), timeout=30)
            # Debug only: the worker's decision line is the one line a tick writes.
            log.debug("tick %s -> %s %s", task, response.status_code, response.text.strip())
        except requests.RequestException as exc:
            log.warning("tick %s failed: %s", task, exc)

    def stop(self) -> None:
        self._stopped.set()
