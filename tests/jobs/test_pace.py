"""The sweep's pace keeps back enough time to record a batch, even after a stall it has averaged
away: the budget is the push's deadline, and a sweep that outlives it has its work redelivered."""

from __future__ import annotations

from consumer.jobs.pace import MIN_RESERVE_SECONDS, Pace


def test_a_slow_write_is_kept_back_for_after_fast_ones_have_averaged_it_away() -> None:
    pace = Pace()
    pace.observe_write(0.4)
    for _ in range(20):
        pace.observe_write(0.01)
    assert pace.write_seconds < 0.05  # the running estimate has forgotten the stall
    assert pace.reserve() >= 0.4


def test_fast_writes_keep_the_floor_of_the_reserve() -> None:
    pace = Pace()
    for _ in range(5):
        pace.observe_write(0.001)
    assert pace.reserve() == MIN_RESERVE_SECONDS
