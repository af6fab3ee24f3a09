"""The scheduler stand-ins' one loop: when rounds fire under each pace, the first round at once or
after an interval, the count, and the stop; on a fake clock, so the figures are exact."""

from __future__ import annotations

import threading

from consumer.ticks.stand_in import Pace, Schedule, run_rounds

PUBLISH_SECONDS = 3.0


class FakeTime:
    """A clock that only waits and publishes move; stops after ``stop_after`` waits."""

    def __init__(self, now: float = 0.0, stop_after: int = 3) -> None:
        self.now = now
        self.stop_after = stop_after
        self.waits: list[float] = []
        self.rounds: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, timeout: float) -> bool:
        if len(self.waits) == self.stop_after:
            return True
        self.waits.append(timeout)
        self.now += timeout
        return False

    def publish(self) -> None:
        self.rounds.append(self.now)
        self.now += PUBLISH_SECONDS


def run(schedule: Schedule, fake: FakeTime) -> int:
    return run_rounds(schedule, fake.publish, fake, clock=fake.clock)


def test_after_pace_waits_a_full_interval_first_and_after_each_round() -> None:
    fake = FakeTime()
    assert run(Schedule(10), fake) == 3
    assert fake.waits == [10, 10, 10]
    assert fake.rounds == [10, 23, 36]


def test_rate_pace_with_first_round_now_makes_up_the_time_spent_publishing() -> None:
    fake = FakeTime()
    assert run(Schedule(10, Pace.RATE, first_now=True), fake) == 3
    assert fake.waits == [0, 7, 7]
    assert fake.rounds == [0, 10, 20]


def test_rate_pace_never_waits_less_than_nothing() -> None:
    fake = FakeTime()
    run(Schedule(2, Pace.RATE, first_now=True), fake)
    assert fake.waits == [0, 0, 0]


def test_aligned_rounds_fall_on_multiples_of_the_interval_since_the_epoch() -> None:
    fake = FakeTime(now=1007.25)
    assert run(Schedule(60, Pace.ALIGNED), fake) == 3
    assert fake.rounds == [1020, 1080, 1140]
    assert fake.waits == [12.75, 57, 57]


def test_count_ends_the_loop_without_a_further_wait() -> None:
    fake = FakeTime(now=5, stop_after=10)
    assert run(Schedule(60, Pace.ALIGNED, count=2), fake) == 2
    assert fake.rounds == [60, 120]
    assert len(fake.waits) == 2


def test_stopped_before_the_first_round_publishes_nothing_even_first_round_now() -> None:
    fake = FakeTime(stop_after=0)
    assert run(Schedule(10, Pace.RATE, first_now=True), fake) == 0
    assert fake.rounds == []


def test_stop_on_a_real_event_ends_the_loop_mid_wait() -> None:
    stopping = threading.Event()
    rounds: list[int] = []
    thread = threading.Thread(
        target=run_rounds, args=(Schedule(3600, first_now=True), lambda: rounds.append(1), stopping)
    )
    thread.start()
    stopping.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(rounds) <= 1
