"""The side-by-side table the demo prints."""

from __future__ import annotations

from consumer.demo.acts import ActResult


def table(before: ActResult | None, after: ActResult) -> str:
    acts = [act for act in (before, after) if act is not None]
    rows: list[tuple[str, ...]] = [("", *(_title(act) for act in acts))]
    rows += [
        ("emails enqueued", *(f"{act.tally.enqueued:,}" for act in acts)),
        ("emails delivered", *(f"{act.tally.delivered:,}" for act in acts)),
        ("recipients with duplicates",
         *(f"{act.tally.recipients_with_duplicates:,}" for act in acts)),
        ("extra copies sent", *(f"{act.tally.extra_copies:,}" for act in acts)),
        ("lost (never delivered)", *(f"{act.tally.lost:,}" for act in acts)),
        ("pods killed mid-sweep", *(str(act.kills) for act in acts)),
        ("jobs the killed pod held", *(_held(act) for act in acts)),
        ("duplicate bound (one per sweep it ran)", *(_bound(act) for act in acts)),
        ("its jobs taken over after the kill", *(_takeover(act) for act in acts)),
        ("deliveries per pod", *(_per_pod(act) for act in acts)),
        ("HTTP statuses seen", *(_statuses(act) for act in acts)),
        ("time to drain", *(_seconds(act) for act in acts)),
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in rows]  # fmt: skip
    lines.insert(1, "-+-".join("-" * width for width in widths))
    notes = [note for act in acts for note in act.notes]
    return "\n".join([*lines, "", *notes])


def _title(act: ActResult) -> str:
    if act.name == "before":
        return "before: in-process timers"
    return "after: consumer serve"


def _held(act: ActResult) -> str:
    return "-" if act.name == "before" else f"{act.held_jobs:,}"


def _bound(act: ActResult) -> str:
    if act.name == "before":
        return "-"
    return f"<= {act.duplicate_bound} (threads: {act.threads})"


def _takeover(act: ActResult) -> str:
    if act.name == "before" or not act.kills:
        return "-"
    seconds = act.takeover_seconds
    return "not within 60 s" if seconds is None else f"{seconds:.1f} s"


def _per_pod(act: ActResult) -> str:
    if not act.per_pod:
        return "each pod sweeps everything"
    total = sum(act.per_pod) or 1
    return " / ".join(f"{100 * count / total:.0f}%" for count in act.per_pod)


def _statuses(act: ActResult) -> str:
    if not act.statuses:
        return "-"
    return ", ".join(f"{status}: {count}" for status, count in sorted(act.statuses.items()))


def _seconds(act: ActResult) -> str:
    return f"{act.seconds:.1f} s" if act.drained else f"not drained after {act.seconds:.0f} s"
