"""``consumer status``: the overview in a terminal, one screen, for when no browser is at hand."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from consumer.dashboard.formatting import age, limit, when
from consumer.dashboard.queries import Overview
from consumer.jobs.flow_admin import KindFlow

JOB_STATUSES = ("pending", "running", "done", "dead", "cancelled")


def render(view: Overview, flow: Iterable[KindFlow] = ()) -> str:
    """The overview; ``flow``: each job kind's flow control, as the dashboard's table shows it
    (only the kinds with a limit or an operator's change are printed)."""
    return "\n".join([*_lines(view), *_flow(flow)])


def _lines(view: Overview) -> Iterator[str]:
    yield f"consumer status at {when(view.now)} UTC"
    yield (
        f"dead events {view.dead_events}   unroutable events {view.unroutable_events}   "
        f"dead jobs {view.dead_jobs}   oldest due job {age(view.oldest_due_seconds)}"
    )
    yield from _deliveries(view)
    yield from _jobs(view)
    yield from _tasks(view)
    yield ""
    yield "recent files"
    for f in view.files[:5]:
        yield f"  {f.status:<9} {f.progress.rows_accepted:>7} ok {f.progress.rows_rejected:>5} bad  gs://{f.bucket}/{f.name}"
    yield ""
    yield "recent warm runs"
    for r in view.warm_runs[:5]:
        yield f"  {r.service} {r.release}  {r.warmer}: {r.targets_ok} ok, {r.targets_failed} failed"


def _deliveries(view: Overview) -> Iterator[str]:
    yield ""
    yield f"{'deliveries':<14}{'last hour':>10}{'last day':>10}"
    for status in sorted(set(view.deliveries_day) | set(view.deliveries_hour)):
        hour, day = view.deliveries_hour.get(status, 0), view.deliveries_day.get(status, 0)
        yield f"  {status:<12}{hour:>10}{day:>10}"


def _jobs(view: Overview) -> Iterator[str]:
    yield ""
    yield f"{'jobs':<16}" + "".join(f"{s:>10}" for s in JOB_STATUSES)
    for kind, counts in view.jobs.items():
        yield f"  {kind[:14]:<14}" + "".join(f"{counts.get(s, 0):>10}" for s in JOB_STATUSES)


def _tasks(view: Overview) -> Iterator[str]:
    yield ""
    yield f"{'tick tasks':<16}{'period':>8}  {'last completed slot':<21}next due"
    for task in view.tasks:
        late = "  LATE" if task.late else ""
        if task.pause:
            late += f"  PAUSED since {when(task.pause.paused_at)} by {task.pause.paused_by}"
        last = when(task.last_slot) if task.last_slot else "never completed"
        yield (
            f"  {task.name[:14]:<14}{age(task.period_seconds):>8}  "
            f"{last:<21}{when(task.next_due)}{late}"
        )


def _flow(kinds: Iterable[KindFlow]) -> Iterator[str]:
    limited = [kind for kind in kinds if kind.effective.limited or kind.override]
    if not limited:
        return
    yield ""
    yield f"{'job kinds':<16}{'in force':<24}{'running':>8}  operator's change"
    for kind in limited:
        change = f"{kind.override} by {kind.updated_by}" if kind.override else "-"
        yield f"  {kind.kind[:14]:<14}{limit(kind.effective):<24}{kind.running:>8}  {change}"
