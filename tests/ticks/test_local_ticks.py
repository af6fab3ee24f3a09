"""The local stack's ticks and the service agree: the stand-in scheduler's rounds fall on slot
starts, and the stack exports its cadence as the ticked tasks' period, so each tick is its own
slot (no duplicates, mail within a round) — as ``consumer serve --local`` does for its own ticks."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import pytest

from consumer.config.settings import Settings
from consumer.plugins import build_registry
from consumer.ticks.stand_in import next_round
from consumer.wire.schedule import Every
from triggers.local.stack import stack_env

START = datetime(2026, 11, 30, 12, 0, 7, 250000, tzinfo=UTC).timestamp()
PUBLISH_DELAY = 0.3  # the emulator stamps publishTime a little after the round


def exported(env_text: str) -> dict[str, str]:
    lines = (line.removeprefix("export ") for line in env_text.splitlines() if line)
    return dict(line.split("=", 1) for line in lines)


def rounds(every: int, count: int) -> list[datetime]:
    """Publish times of the scheduler's first ``count`` rounds after START."""
    times, now = [], START
    for _ in range(count):
        now = next_round(now, every)
        times.append(datetime.fromtimestamp(now + PUBLISH_DELAY, UTC))
    return times


def test_rounds_fall_on_multiples_of_the_interval() -> None:
    assert next_round(START, 60) == datetime(2026, 11, 30, 12, 1, tzinfo=UTC).timestamp()
    assert next_round(120.0, 60) == 180.0  # strictly after: a round never repeats
    assert next_round(0.2, 0.5) == 0.5


@pytest.mark.parametrize("every", [1, 10, 60])
def test_each_stack_tick_is_its_own_slot(every: int) -> None:
    env = exported(
        stack_env("127.0.0.1:8085", "http://127.0.0.1:4443", every, ["sweep", "cleanup"])
    )
    assert env["PUBSUB_EMULATOR_HOST"] == "127.0.0.1:8085"
    settings = Settings.from_env({"CONSUMER_LOCAL_MODE": "true", **env})
    registry = build_registry(settings)
    for task in ("sweep", "cleanup"):
        schedule = registry.schedule_of(task)
        assert schedule == Every(every)
        slots = [schedule.slot_of(moment) for moment in rounds(every, 12)]
        assert len(set(slots)) == 12
        assert all(schedule.previous(b) == a for a, b in pairwise(slots))


def test_without_the_stack_env_most_ticks_would_be_duplicates() -> None:
    """What docs/local-stack.md described: the registered five-minute sweep, ticks every 60 s."""
    schedule = build_registry(Settings(local_mode=True)).schedule_of("sweep")
    slots = [schedule.slot_of(moment) for moment in rounds(60, 10)]
    assert len(set(slots)) == 3  # 12:01 to 12:10: 10 ticks, 3 slots, 7 answered duplicate
