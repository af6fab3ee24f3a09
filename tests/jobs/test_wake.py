"""Wake-ups: a committed enqueue asks for one sweep now, coalesced per process, and never slows
or fails the enqueue. In local mode the wake-up is POSTed to a server (here, a recorder)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.support.target_servers import Dripping
from consumer import NewJob, enqueue, enqueue_many
from consumer.config.settings import Settings
from consumer.jobs import wake
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.wire.envelope import parse_push
from consumer.wire.outcomes import Kind
from tests.conftest import free_port


class Recorder:
    """A loopback server that keeps every body POSTed to it, with when it arrived."""

    def __init__(self) -> None:
        self.bodies: list[tuple[float, dict[str, Any]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.bodies.append((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.server.shutdown()
    recorder.server.server_close()


def woken(engine: Engine, settings: Settings, url: str) -> Settings:
    settings = settings.with_values(wake_url=url, wake_window_ms=100)
    Service.of(settings, engine)  # the composition root attaches the engine
    return settings


def test_a_burst_of_enqueues_is_one_or_two_wake_ups_the_last_after_the_last_enqueue(
    engine: Engine, settings: Settings, recorder: Recorder
) -> None:
    woken(engine, settings, recorder.url)
    first_enqueue = time.monotonic()
    for n in range(30):
        enqueue(engine, "email", {"to": f"u{n}@example.com"})
    last_enqueue = time.monotonic()
    wake.flush(engine, 5)
    arrivals = [at for at, _ in recorder.bodies]
    # At most one per 100 ms window the burst lasted, plus the last: 1-3 when it takes under a
    # window or two (a loaded machine stretches it, each enqueue being a few round trips).
    windows = int((last_enqueue - first_enqueue) / 0.1)
    assert 1 <= len(arrivals) <= max(3, windows + 2)
    assert arrivals[-1] >= last_enqueue


def test_a_wake_up_sweeps_under_a_key_of_its_own(
    engine: Engine, settings: Settings, recorder: Recorder
) -> None:
    woken(engine, settings, recorder.url)
    enqueue(engine, "email", {"to": "a@example.com", "subject": "s", "text": "t"})
    wake.flush(engine, 5)
    [(_, body)] = recorder.bodies
    message = parse_push({"Content-Type": "application/json"}, json.dumps(body).encode())
    outcome = Dispatcher(settings, engine, build_registry(settings)).dispatch(message)
    assert outcome.kind is Kind.DONE and outcome.details["done"] == 1
    assert outcome.key.startswith("tick:sweep:continuation:wake-")


def test_a_rolled_back_enqueue_wakes_nobody_a_committed_one_does(
    engine: Engine, settings: Settings, recorder: Recorder
) -> None:
    woken(engine, settings, recorder.url)
    with pytest.raises(RuntimeError), engine.begin() as connection:
        enqueue_many(connection, [NewJob("email", {})])
        raise RuntimeError("roll back")
    wake.flush(engine, 1)
    assert recorder.bodies == []
    with engine.begin() as connection:
        enqueue_many(connection, [NewJob("email", {})])
    wake.flush(engine, 5)
    assert len(recorder.bodies) == 1


def test_an_unreachable_target_neither_fails_nor_slows_an_enqueue(
    engine: Engine, settings: Settings
) -> None:
    woken(engine, settings, f"http://127.0.0.1:{free_port()}/push")
    started = time.monotonic()
    assert enqueue(engine, "email", {}).inserted
    assert time.monotonic() - started < 0.5
    wake.flush(engine, 5)  # logged, not raised


def test_without_a_target_nothing_is_woken(engine: Engine, settings: Settings) -> None:
    Service.of(settings, engine)
    assert wake.Target.of(settings) is None
    assert wake.Target.of(settings.with_values(local_mode=False, wake_url="http://x/push")) is None
    topic = settings.with_values(wake_topic="projects/p/topics/wake")
    assert wake.Target.of(topic) == wake.Target("projects/p/topics/wake", "", 0.05)


def test_a_wake_up_waits_for_the_sweeps_answer_no_longer_than_the_ack_deadline(
    settings: Settings,
) -> None:
    target = wake.Target.of(settings.with_values(wake_url="http://x/push", ack_deadline_seconds=45))
    assert target is not None and target.answer_seconds == 45
    with Dripping(interval=0.2).running() as server:  # its answer takes 8 s, a byte at a time
        sender = wake.Sender(wake.Target(url=server.url, answer_seconds=1.0))
        started = time.monotonic()
        sender.request()
        sender.wait_sent(10)
        assert time.monotonic() - started < 3, "the wake-up outlived its deadline"
