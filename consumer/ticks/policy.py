"""The tick tasks' route policy (``consumer.pipeline.policy``): what an operator's controls and
a task's schedule decide about a tick around its claim (docs/flow-control.md, docs/ticks.md).

A tick whose slot has not begun is answered unrecorded; a backlog's ticks are coalesced (only
the current slots run); a paused task's ticks are skipped; under overlap ``skip`` or ``wait`` a
run holds its task (``tick_runs``, one conditional upsert, so it holds across every pod) and a
tick that cannot take it is skipped or deferred; the catch-up policy picks the missed slots that
get runs of their own (``consumer.ticks.catch_up``); a completed slot is remembered. The
dispatcher claims, runs and records; this module decides and holds.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from consumer.config.settings import Settings
from consumer.db import retry
from consumer.errors import Unavailable
from consumer.inbox.model import Claim
from consumer.inbox.store import Inbox
from consumer.pipeline.policy import Policy, Renew, Runs
from consumer.pipeline.registry import Registry
from consumer.pipeline.running import Verdict
from consumer.ticks import catch_up
from consumer.ticks.answers import PAUSED, jitter_outcome, waiting, waiting_outcome
from consumer.ticks.store import TickStore
from consumer.wire import jitter, schedule
from consumer.wire.events import Event, Route, TickEvent
from consumer.wire.outcomes import Kind, Outcome
from consumer.wire.schedule import Overlap, TickPolicy
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.ticks")


def register(registry: Registry) -> None:
    """Make the tick rules the tick route's policy."""
    registry.route_policy(
        Route.TICK, lambda settings, clock, rerun: TickRules(settings, registry, clock, rerun)
    )


@dataclass(frozen=True)
class TickRules(Policy):
    settings: Settings
    registry: Registry
    clock: Clock
    rerun: bool = False
    """A rerun of a stored tick (a replay, the re-drive) runs the slot it is given, which was
    claimed while it was current and never ran to its end: no backlog's coalescing."""

    def policy(self, task: str) -> TickPolicy:
        return self.registry.policy_of(task, self.settings.tick_control.policies)

    def holds(self, event: TickEvent) -> bool:
        """Whether the tick's run must hold its task (``tick_runs``): slots' ticks and run-nows
        whose overlap policy is ``skip`` or ``wait``. A continuation carries a run on, and a
        catch-up run is serialised by the tick that makes it."""
        if event.continuation or event.catch_up:
            return False
        return self.policy(event.task).overlap is not Overlap.ALLOW

    def early(self, event: Event) -> Outcome | None:
        """A tick whose slot has not begun is forged or skewed: acknowledged but not claimed, so
        no row takes that slot's key (the genuine tick runs) and no completed slot advances."""
        tolerance = self.settings.ticks.future_tolerance_seconds
        if early := schedule.future_reason(_tick(event).slot, self.clock(), tolerance):
            details = {"reason": early, "recorded": False}
            return Outcome(Kind.SKIPPED, event.key, details, route=event.route.value)
        return None

    def waiting(self, event: Event, inbox: Inbox) -> Outcome | None:
        """The run a ``wait`` tick waits for, read before it claims (so nothing is written); or
        a jittered slot's start, when it is further ahead than the delivery may wait."""
        tick = _tick(event)
        if self._jitter_wait(tick) > self.settings.handler_budget_seconds / 2:
            return jitter_outcome(event, self._jitter_start(tick) or self.clock())
        if not self.holds(tick) or self.policy(tick.task).overlap is not Overlap.WAIT:
            return None
        holder = _store(inbox).run_holder(tick.task, self.clock())
        return waiting_outcome(event, holder) if holder and holder != event.key else None

    def stale(self, event: Event, inbox: Inbox) -> str:
        """Ticks from a backlog are coalesced: only the current slots run."""
        tick = _tick(event)
        if self.rerun or tick.continuation or tick.run_now:
            return ""  # a continuation carries on a run that was current; a run now is now
        max_age = self.settings.ticks.max_age_periods
        if old := schedule.stale_reason(tick.schedule, tick.slot, self.clock(), max_age):
            return old
        last = _store(inbox).last_slot(tick.task)
        if last is not None and tick.slot < last:
            return f"tick slot {tick.slot.isoformat()} precedes completed slot {last.isoformat()}"
        return ""

    def hold(self, event: Event, claim: Claim, inbox: Inbox) -> Verdict | None:
        """A claimed tick of a paused task is recorded ``skipped`` (reason "paused"); else the
        task is held for this run, for as long as its claim, or the tick yields: ``skipped``
        naming the run still going, or (``wait``) its claim given back."""
        tick = _tick(event)
        if pause := _store(inbox).paused(tick.task):
            return Verdict(Kind.SKIPPED, {"reason": PAUSED, "paused_by": pause.paused_by})
        if not self.holds(tick):
            return None
        now = self.clock()
        if _store(inbox).take_run(tick.task, event.key, claim.lease_until, now):
            return None
        other = _store(inbox).run_holder(tick.task, now) or "another run"
        if self.policy(tick.task).overlap is Overlap.WAIT:
            # Failed with the attempt refunded: the retry claims it again, as a first attempt.
            return Verdict(Kind.RETRY, {"waiting_for": other}, waiting(other), True)
        return Verdict(Kind.SKIPPED, {"reason": f"overlap: {other} is still running"})

    def release(self, event: Event, inbox: Inbox) -> None:
        tick = _tick(event)
        if self.holds(tick):
            _store(inbox).release_run(tick.task, event.key)

    def run(self, event: Event, runs: Runs) -> Outcome:
        if (pause := self._jitter_wait(_tick(event))) > 0:  # a jittered slot: at its offset
            time.sleep(min(pause, self.settings.handler_budget_seconds / 2))
        missed = catch_up.missed_runs(self, _tick(event), _store(runs.inbox))
        return catch_up.run(self.settings, event, missed, runs)

    def renewing(self, event: Event, inbox: Inbox, renew: Renew) -> Renew:
        """``renew`` (the claim's heartbeat) that also keeps the task held for as long."""
        tick = _tick(event)
        if not self.holds(tick):
            return renew
        lease = timedelta(seconds=self.settings.lease_seconds)

        def both() -> bool:
            if not renew():
                return False
            _store(inbox).renew_run(tick.task, event.key, self.clock() + lease)
            return True

        return both

    def after_run(self, event: Event, outcome: Outcome, inbox: Inbox, record_by: float) -> None:
        """A slot's run and a catch-up run complete their slot (a continuation or a run now
        none): retried like the finish; the tick is done either way, a missed advance only
        delays coalescing."""
        tick = _tick(event)
        if outcome.kind is not Kind.DONE or tick.continuation or tick.run_now:
            return
        advance = lambda: _store(inbox).advance_slot(tick.task, tick.slot, str(tick.schedule))  # noqa: E731
        try:
            retry.until_deadline(advance, record_by, f"the slot of {event.key}")
        except Unavailable:
            log.warning("could not record the completed slot of %s", event.key)

    def answer(self, event: Event, verdict: Verdict, recorded: Outcome) -> Outcome:
        """A tick that waits for another run gave its claim back (failed, attempt refunded): it
        is answered as one that never claimed."""
        if recorded.kind is Kind.RETRY and "waiting_for" in verdict.details:
            return waiting_outcome(event, verdict.details["waiting_for"])
        return recorded

    def _jitter_start(self, tick: TickEvent) -> datetime | None:
        """When a slot's run starts under its task's jitter (``None``: no jitter; a run now, a
        continuation, a catch-up run and a rerun are not jittered)."""
        window = self.policy(tick.task).jitter
        if not window or self.rerun or tick.run_now or tick.continuation or tick.catch_up:
            return None
        # Never past the next slot, whatever the settings say (a declared window is checked at
        # start; one in CONSUMER_TICK_POLICIES, or a period changed by the settings, is not).
        gap = (tick.schedule.following(tick.slot) - tick.slot).total_seconds()
        return jitter.start_of(tick.task, tick.slot, min(window, gap))

    def _jitter_wait(self, tick: TickEvent) -> float:
        """Seconds until a slot's run starts under its task's jitter (0: now, or no jitter)."""
        start = self._jitter_start(tick)
        return 0.0 if start is None else max(0.0, (start - self.clock()).total_seconds())

    def unroutable(self, event: Event) -> str:
        names = ", ".join(sorted(self.registry.tasks)) or "none"
        return f"no tick task {_tick(event).task!r} is registered (registered: {names})"


def _tick(event: Event) -> TickEvent:
    assert isinstance(event, TickEvent)  # the tick route's events are ticks
    return event


def _store(inbox: Inbox) -> TickStore:
    """The tick tables, on the delivery's connection."""
    return TickStore(inbox.engine, inbox.connection)
