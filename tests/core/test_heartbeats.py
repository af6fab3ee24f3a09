"""The process's inbox-lease heartbeat: held claims are renewed on time, short ones never, a lost
lease stops its renewals, a failed renewal is tried again, and the thread ends when idle."""

from __future__ import annotations

import threading
import time

from consumer.pipeline.heartbeat import Heartbeats


def running() -> int:
    return sum(thread.name == "inbox-lease" for thread in threading.enumerate())


def test_held_claims_are_renewed_every_period_and_short_ones_never() -> None:
    heartbeats, beats = Heartbeats(every=0.1, tick=0.01), {"long": 0, "short": 0}

    def counter(name: str) -> object:
        return lambda: beats.__setitem__(name, beats[name] + 1) or True

    with heartbeats.kept(counter("long")):  # type: ignore[arg-type]
        with heartbeats.kept(counter("short")):  # type: ignore[arg-type]
            time.sleep(0.03)
        time.sleep(0.5)
    assert beats["short"] == 0
    assert 3 <= beats["long"] <= 6, beats


def test_a_lost_lease_is_not_renewed_again_and_a_failed_renewal_is_retried() -> None:
    heartbeats, calls = Heartbeats(every=0.05, tick=0.01), {"lost": 0, "failing": 0}

    def lost() -> bool:
        calls["lost"] += 1
        return False

    def failing() -> bool:
        calls["failing"] += 1
        raise ConnectionError("database unreachable")

    with heartbeats.kept(lost), heartbeats.kept(failing):
        time.sleep(0.4)
    assert calls["lost"] == 1
    assert calls["failing"] >= 10  # every tick once due: a blip is retried at once


def test_the_thread_ends_when_no_claim_is_held_and_starts_again_on_demand() -> None:
    heartbeats = Heartbeats(every=0.05, tick=0.01)
    with heartbeats.kept(lambda: True):
        assert running() >= 1
    deadline = time.monotonic() + 1
    while running() and time.monotonic() < deadline:  # every heartbeat here is idle now
        time.sleep(0.01)
    assert running() == 0
    renewed = threading.Event()
    with heartbeats.kept(lambda: renewed.set() or True):
        assert renewed.wait(1)
