"""What a chaos run prints: each fault with its recovery time, throughput per 10 s, the ledger's
totals, and the last line ``chaos: N faults, lost N, duplicates N (N attributed), recovery p50
N s max N s``.

Recovery after a fault is measured from its end (a kill's end is the kill itself: the pod's
restart is part of recovery) until the effects (emails arriving, calls done) over the next
``WINDOW`` seconds are back to half their rate in the ``BEFORE`` seconds before the fault, or
until the backlog drained (the last effect of the run); after a kill, not before every job the
killed pod held is finished. The rate before the fault counts no higher than the run's typical
rate (the median of its ``BEFORE``-second windows): a catch-up burst after an earlier fault is
not the throughput to get back to, and would make a fault that changed nothing look slow."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.chaos.faults import Fault
from bench.chaos.ledger import Account, Records
from bench.chaos.sinks import Call
from bench.chaos.ticks import tick_line

BEFORE, WINDOW, STEP, SHARE = 10.0, 3.0, 0.25, 0.5
TABLE_SECONDS = 10


@dataclass(frozen=True)
class Timeline:
    """When each effect happened, sorted: emails on arrival, calls when first seen done."""

    emails: list[float]
    calls: list[float]
    events: list[float]

    @classmethod
    def of(cls, mail: list[tuple[str, float]], calls: list[Call], records: Records) -> Timeline:
        done = [call.seen for call in calls if call.outcome in ("done", "lost")]
        finished = [at for _, _, at in records.events.values() if at is not None]
        return cls(sorted(at for _, at in mail), sorted(done), sorted(finished))

    @property
    def effects(self) -> list[float]:
        return sorted(self.emails + self.calls)


def recoveries(faults: Sequence[Fault], timeline: Timeline, records: Records) -> list[float]:
    effects = timeline.effects
    drained = effects[-1] if effects else 0.0
    typical = typical_rate(effects)
    return [_recovery(fault, effects, drained, records, typical) for fault in faults]


def typical_rate(effects: list[float]) -> float:
    """Effects per second in the run's median ``BEFORE``-second window."""
    if not effects:
        return 0.0
    starts = range(int((effects[-1] - effects[0]) // BEFORE) or 1)
    counts = [_count(effects, effects[0] + n * BEFORE, effects[0] + (n + 1) * BEFORE)
              for n in starts]  # fmt: skip
    return statistics.median(counts) / BEFORE


def _recovery(
    fault: Fault, effects: list[float], drained: float, records: Records, typical: float
) -> float:
    rate = min(_count(effects, fault.start - BEFORE, fault.start) / BEFORE, typical)
    back = fault.end
    if rate > 0:
        needed = rate * WINDOW * SHARE
        while back < drained and _count(effects, back, back + WINDOW) < needed:
            back += STEP
        back = min(back, max(drained, fault.end))
    return max(0.0, max([back, *_held_finished(fault, records, drained)]) - fault.end)


def _held_finished(fault: Fault, records: Records, drained: float) -> list[float]:
    """When each job and inbox row held at a kill was finished (by whoever took it over)."""
    jobs = {job.id: job.finished_at for job in records.jobs}
    held = [jobs.get(job) or drained for job in fault.held_jobs or ()]
    return held + [records.events.get(key, ("", "", None))[2] or drained
                   for key in fault.held_events]  # fmt: skip


def _count(times: list[float], start: float, end: float) -> int:
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def throughput(timeline: Timeline, faults: Sequence[Fault], started: float,
               ended: float) -> list[str]:  # fmt: skip
    lines = ["| t (s) | emails | calls | events done | faults started |", "|---|---|---|---|---|"]
    for begin in range(0, int(ended - started) + 1, TABLE_SECONDS):
        low, high = started + begin, started + begin + TABLE_SECONDS
        names = ", ".join(f.name for f in faults if low <= f.start < high) or "-"
        counts = (_count(series, low, high)
                  for series in (timeline.emails, timeline.calls, timeline.events))  # fmt: skip
        lines.append(f"| {begin}-{begin + TABLE_SECONDS} | " + " | ".join(map(str, counts))
                     + f" | {names} |")  # fmt: skip
    return lines


def fault_lines(faults: Sequence[Fault], recovered: Sequence[float], found: Account,
                started: float) -> list[str]:  # fmt: skip
    lines = ["| fault | at (s) | lasted (s) | held jobs / events | duplicates | recovery (s) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for fault, seconds in zip(faults, recovered, strict=True):
        held = (
            "-" if fault.held_jobs is None else f"{len(fault.held_jobs)} / {len(fault.held_events)}"
        )
        repeats = sum(1 for duplicate in found.duplicates if duplicate.fault is fault)
        cells = [fault.name, f"{fault.start - started:.1f}", f"{fault.end - fault.start:.1f}",
                 held, str(repeats), f"{seconds:.1f}"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ledger_lines(found: Account, started: float) -> list[str]:
    lines = [f"expected: {_pairs(found.expected)}", tick_line(found.ticks),
             f"lost: {_pairs(found.lost) or 'none'}"]  # fmt: skip
    lines += [f"  lost {example}" for example in found.examples]
    kinds = ", ".join(sorted({d.fault.kind for d in found.duplicates if d.fault is not None}))
    lines.append(f"duplicates: {len(found.duplicates)} ({found.attributed} attributed"
                 f"{': ' + kinds if kinds else ''})")  # fmt: skip
    lines += [f"  unattributed: {d.what} {d.identity}, first at {d.first - started:.1f} s, "
              f"again at {d.again - started:.1f} s ({d.history})"
              for d in found.duplicates if d.fault is None][:20]  # fmt: skip
    if found.unfinished_wakeups:
        lines.append(f"wake-ups a killed pod left running (the next tick did their work): "
                     f"{found.unfinished_wakeups}")  # fmt: skip
    return lines


def last_line(faults: int, found: Account, recovered: Sequence[float]) -> str:
    p50 = statistics.median(recovered) if recovered else 0.0
    worst = max(recovered, default=0.0)
    return (f"chaos: {faults} faults, lost {sum(found.lost.values())}, duplicates "
            f"{len(found.duplicates)} ({found.attributed} attributed), recovery p50 {p50:.1f} s "
            f"max {worst:.1f} s")  # fmt: skip


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items() if count)
