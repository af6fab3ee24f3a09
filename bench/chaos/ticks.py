"""Ticks published against tick rows, so a lost tick shows at once. The inbox keys a tick by its
slot (``tick:sweep:<slot>``), the second of its ``publishTime``, which the emulator stamps
between the publish call's start and its answer: so each published tick names the row it must
have. A tick whose slot has no row is lost (one published while the run drained only once it is
``GRACE_SECONDS`` old: the last few may still be on their way); two ticks published within one
second share their slot's row."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from bench.chaos.load import Tick

GRACE_SECONDS = 30.0
Events = Mapping[str, tuple[str, str, float | None]]
"""key -> (route, status, finished_at), as ``bench.chaos.ledger.Records`` holds them."""


@dataclass(frozen=True)
class TickCount:
    published: int
    rows: Counter[str]
    """The slots' rows by status (a continuation, a run now or a catch-up run is no slot's)."""
    shared: int = 0
    """Published ticks whose slot an earlier published tick already had."""
    missing: tuple[Tick, ...] = ()
    in_flight: int = 0
    """Ticks published while the run drained, younger than the grace, with no row yet."""
    unexplained: int = 0
    """Slot rows no published tick maps to (a clock that disagrees, or a stray publisher)."""


def count_ticks(ticks: list[Tick], events: Events, read_at: float) -> TickCount:
    slots = {second: status for key, (route, status, _) in events.items()
             if route == "tick" and (second := slot_second(key)) is not None}  # fmt: skip
    covered: set[int] = set()
    shared, in_flight, missing = 0, 0, []
    for tick in ticks:
        hits = [second for second in range(int(tick.sent), int(tick.answered) + 1)
                if second in slots]  # fmt: skip
        fresh = [second for second in hits if second not in covered]
        if fresh:
            covered.add(fresh[0])
        elif hits:
            shared += 1
        elif tick.draining and tick.answered > read_at - GRACE_SECONDS:
            in_flight += 1
        else:
            missing.append(tick)
    rows = Counter(slots.values())
    return TickCount(len(ticks), rows, shared, tuple(missing), in_flight, len(slots) - len(covered))


def slot_second(key: str) -> int | None:
    """The epoch second of a slot's own tick key (``tick:TASK:<ISO time>``), else ``None``."""
    if not key.startswith("tick:"):
        return None
    try:
        return int(datetime.fromisoformat(key.split(":", 2)[2]).timestamp())
    except (IndexError, ValueError):
        return None


def tick_line(count: TickCount) -> str:
    """``ticks: published N, rows N (done N, skipped N, running N); N shared a slot, N without
    a row`` (then any in flight, and any row no published tick explains)."""
    statuses = ", ".join(f"{status} {n}" for status, n in sorted(count.rows.items())) or "none"
    line = (f"ticks: published {count.published}, rows {count.rows.total()} ({statuses}); "
            f"{count.shared} shared a slot, {len(count.missing)} without a row")  # fmt: skip
    if count.in_flight:
        line += f", {count.in_flight} published in the last {GRACE_SECONDS:.0f} s not seen yet"
    if count.unexplained:
        line += f", {count.unexplained} rows of slots no published tick had"
    return line
