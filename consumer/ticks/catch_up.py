"""Catching up: the runs of the slots a task missed, per its catch-up policy (``latest``,
``once``, ``all:N``; docs/flow-control.md), made by the tick that finds them missed, before its
own run and on its own connection, each under its own key."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Protocol

from consumer.config.settings import Settings
from consumer.pipeline.policy import Runs
from consumer.pipeline.running import Verdict
from consumer.ticks.answers import waiting_outcome
from consumer.ticks.store import TickStore
from consumer.wire import schedule
from consumer.wire.events import Event, TickEvent
from consumer.wire.outcomes import Kind, Outcome
from consumer.wire.schedule import CatchUpMode, TickPolicy
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.ticks")


class Rules(Protocol):
    """What the catch-up reads of the tick rules (``consumer.ticks.policy.TickRules``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock: ...

    def policy(self, task: str) -> TickPolicy: ...


def missed_runs(rules: Rules, event: TickEvent, store: TickStore) -> list[TickEvent]:
    """The runs that catch up the slots missed between the completed slot and the oldest
    slot the stale rule still runs, per the task's catch-up policy, oldest first."""
    if not event.scheduled:
        return []
    catch_up = rules.policy(event.task).catch_up
    if catch_up.mode is CatchUpMode.LATEST:
        return []  # the completed slot is not even read
    last = store.last_slot(event.task)
    if last is None:
        return []  # a task that never completed a slot has missed nothing
    oldest = event.schedule.recent(rules.clock(), rules.settings.ticks.max_age_periods)
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


def run(settings: Settings, event: Event, missed: list[TickEvent], runs: Runs) -> Outcome:
    """The ``missed`` runs, oldest first, in the first half of this delivery's budget; then
    the tick's own run. Slots left over defer the tick (its retry carries on from the last
    caught-up slot)."""
    budget = settings.handler_budget_seconds
    ran: dict[str, str] = {}
    for missed_run in missed:
        left = runs.started + budget / 2 - time.monotonic()
        if left <= 0:
            break
        ran[missed_run.slot.isoformat()] = kind = runs.run_other(missed_run, left)
        log.info("caught up", extra={"key": missed_run.key, "outcome": kind})
    if len(ran) < len(missed):
        runs.finish(Verdict(Kind.RETRY, {"waiting_for": "catch-up"}, "catching up", True))
        return waiting_outcome(event, "catch-up", caught_up=ran, left=len(missed) - len(ran))
    rest = runs.started + budget - time.monotonic() if missed else None
    outcome = runs.run(event, rest)
    return replace(outcome, details={**outcome.details, "caught_up": ran}) if ran else outcome
