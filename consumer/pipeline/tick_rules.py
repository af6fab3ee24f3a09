"""What an operator's controls decide about a tick, around its claim (docs/flow-control.md): a
paused task's ticks are skipped; under overlap ``skip`` or ``wait`` a run holds its task
(``tick_runs``, one conditional upsert, so it holds across every pod) and a tick that cannot take
it is skipped or deferred; the catch-up policy picks the missed slots that get runs of their own.
The dispatcher claims, runs and records; this module decides and holds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from consumer.config.settings import Settings
from consumer.inbox.model import Claim
from consumer.inbox.store import Inbox
from consumer.pipeline.registry import Registry
from consumer.pipeline.running import Verdict
from consumer.wire import schedule
from consumer.wire.events import Event, TickEvent
from consumer.wire.outcomes import Kind, Outcome
from consumer.wire.schedule import CatchUpMode, Overlap, TickPolicy
from consumer.wire.timeutil import Clock

PAUSED = "paused"
WAIT_STATUS = 429
"""A deferred tick's answer: a nack (Pub/Sub and schedulers retry it with their backoff) that
is neither a 5xx nor a failure of ours, so no error rate or alert counts it."""


@dataclass(frozen=True)
class TickRules:
    settings: Settings
    registry: Registry
    clock: Clock

    def policy(self, task: str) -> TickPolicy:
        return self.registry.policy_of(task, self.settings.tick_control.policies)

    def holds(self, event: Event) -> bool:
        """Whether the tick's run must hold its task (``tick_runs``): slots' ticks and run-nows
        whose overlap policy is ``skip`` or ``wait``. A continuation carries a run on, and a
        catch-up run is serialised by the tick that makes it."""
        if not isinstance(event, TickEvent) or event.continuation or event.catch_up:
            return False
        return self.policy(event.task).overlap is not Overlap.ALLOW

    def busy(self, event: Event, inbox: Inbox) -> str:
        """The run a ``wait`` tick waits for, read before it claims (so nothing is written)."""
        if not self.holds(event) or self.policy(_task(event)).overlap is not Overlap.WAIT:
            return ""
        holder = inbox.run_holder(_task(event), self.clock())
        return holder if holder and holder != event.key else ""

    def paused(self, event: Event, inbox: Inbox) -> Verdict | None:
        """A claimed tick of a paused task is recorded ``skipped`` (reason "paused")."""
        if not isinstance(event, TickEvent):
            return None
        pause = inbox.paused(event.task)
        if pause is None:
            return None
        return Verdict(Kind.SKIPPED, {"reason": PAUSED, "paused_by": pause.paused_by})

    def take(self, event: Event, claim: Claim, inbox: Inbox) -> Verdict | None:
        """Hold the task for this run, for as long as its claim; else the verdict of a tick that
        yields: ``skipped`` naming the run still going, or (``wait``) its claim given back."""
        if not self.holds(event):
            return None
        task, now = _task(event), self.clock()
        if inbox.take_run(task, event.key, claim.lease_until, now):
            return None
        other = inbox.run_holder(task, now) or "another run"
        if self.policy(task).overlap is Overlap.WAIT:
            # Failed with the attempt refunded: the retry claims it again, as a first attempt.
            return Verdict(Kind.RETRY, {"waiting_for": other}, waiting(other), True)
        return Verdict(Kind.SKIPPED, {"reason": f"overlap: {other} is still running"})

    def release(self, event: Event, inbox: Inbox) -> None:
        if self.holds(event):
            inbox.release_run(_task(event), event.key)

    def renewing(self, event: Event, inbox: Inbox, renew: Callable[[], bool]) -> Callable[[], bool]:
        """``renew`` (the claim's heartbeat) that also keeps the task held for as long."""
        if not self.holds(event):
            return renew
        seconds = timedelta(seconds=self.settings.lease_seconds)

        def both() -> bool:
            if not renew():
                return False
            inbox.renew_run(_task(event), event.key, self.clock() + seconds)
            return True

        return both

    def catch_ups(self, event: Event, inbox: Inbox) -> list[TickEvent]:
        """The runs that catch up the slots missed between the completed slot and the oldest
        slot the stale rule still runs, per the task's catch-up policy, oldest first."""
        if not isinstance(event, TickEvent) or not event.scheduled:
            return []
        catch_up = self.policy(event.task).catch_up
        if catch_up.mode is CatchUpMode.LATEST:
            return []  # the completed slot is not even read
        last = inbox.last_slot(event.task)
        if last is None:
            return []  # a task that never completed a slot has missed nothing
        oldest = event.schedule.recent(self.clock(), self.settings.ticks.max_age_periods)
        limit = 1 if catch_up.mode is CatchUpMode.ONCE else catch_up.limit
        slots = schedule.missed_slots(event.schedule, last, oldest, limit)
        if not slots:
            return []
        missed = {
            "mode": catch_up.mode.value,
            "first": event.schedule.following(last).isoformat(),
            "last": slots[-1].isoformat(),
        }
        payload = {**event.payload, "catch_up": missed}
        return [replace(event, slot=slot, catch_up=True, payload=payload) for slot in slots]


def waiting(other: str) -> str:
    return f"waiting for {other} to finish (overlap policy wait)"


def waiting_outcome(event: Event, other: str, **details: object) -> Outcome:
    """A tick deferred while ``other`` runs: nothing of it is recorded, and the answer is a
    retry later (``WAIT_STATUS``)."""
    body = {"status": "waiting", "waiting_for": other, "reason": waiting(other), **details}
    return Outcome(Kind.IN_PROGRESS, event.key, body, status=WAIT_STATUS, route=event.route.value)


def _task(event: Event) -> str:
    assert isinstance(event, TickEvent)
    return event.task
