"""Ticks published against the slots' rows (no processes): each published tick names the row of
its second; a tick with no row is lost, two in one second share a row, and the last ticks of the
drain are not expected yet."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.chaos.ledger import Records, account
from bench.chaos.load import Published, Tick
from bench.chaos.ticks import GRACE_SECONDS, count_ticks, tick_line

SECOND = datetime(2026, 12, 3, 8, 41, 0, tzinfo=UTC).timestamp()


def slot(offset: int, status: str, suffix: str = "") -> tuple[str, tuple[str, str, None]]:
    moment = datetime.fromtimestamp(SECOND + offset, UTC).isoformat()
    return f"tick:sweep:{suffix}{moment}", ("tick", status, None)


def tick(offset: float, draining: bool = False) -> Tick:
    return Tick(SECOND + offset, SECOND + offset + 0.01, draining)


def test_each_published_tick_has_the_row_of_its_second() -> None:
    events = dict([slot(0, "done"), slot(1, "skipped"), slot(3, "running"),
                   slot(4, "running", "catch-up:"), ("job:x", ("job", "done", None))])  # fmt: skip
    ticks = [tick(0.2), tick(0.7), tick(1.5), tick(2.5), tick(3.1)]
    count = count_ticks(ticks, events, read_at=SECOND + 100)
    assert (count.published, count.shared, count.unexplained) == (5, 1, 0)
    assert count.missing == (ticks[3],)
    assert count.rows == {"done": 1, "skipped": 1, "running": 1}  # not the catch-up run
    assert tick_line(count) == ("ticks: published 5, rows 3 (done 1, running 1, skipped 1); "
                                "1 shared a slot, 1 without a row")  # fmt: skip


def test_a_publish_that_straddles_a_second_may_have_either_row() -> None:
    straddling = Tick(SECOND + 0.99, SECOND + 1.02)
    count = count_ticks([straddling], dict([slot(1, "done")]), read_at=SECOND + 100)
    assert (count.missing, count.shared, count.unexplained) == ((), 0, 0)


def test_the_drain_s_latest_ticks_are_in_flight_and_older_ones_are_lost() -> None:
    read_at = SECOND + 100
    young, old = tick(100 - GRACE_SECONDS + 1, draining=True), tick(10, draining=True)
    count = count_ticks([young, old, tick(99)], dict([slot(50, "done")]), read_at)
    assert count.missing == (old, tick(99))  # a tick of the load is expected however young
    assert count.in_flight == 1 and count.unexplained == 1
    assert tick_line(count).endswith(
        ", 1 published in the last 30 s not seen yet, 1 rows of slots no published tick had"
    )


def test_a_published_tick_with_no_row_is_lost_on_the_ledger() -> None:
    published = Published(ticks=[tick(0.5), tick(1.5)])
    found = account(published, Records([], dict([slot(1, "done")])), [], [], [])
    assert found.lost == {"events": 1}
    assert found.examples == ["events: the tick published at 08:41:00.500 UTC has no inbox row"]
    assert found.expected["events"] == 2
