"""The seam between the pipeline and a feature that rules its route's deliveries around their
claim (the tick tasks' pause, overlap, catch-up and coalescing: ``consumer.ticks``).

The dispatcher claims, runs and records every delivery the same way; at each step it asks the
event's route policy whether something else applies. A route without one gets ``Policy``, whose
every answer is "nothing": the pipeline knows no feature. A feature declares its route's policy
with ``registry.route_policy(route, factory)``; each dispatcher builds it once from its settings,
its clock and whether it reruns stored messages (``consumer.pipeline.rerun``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from consumer.config.settings import Settings
from consumer.inbox.model import Claim
from consumer.inbox.store import Inbox
from consumer.pipeline.running import Verdict
from consumer.wire.events import Event
from consumer.wire.outcomes import Outcome
from consumer.wire.timeutil import Clock

Renew = Callable[[], bool]
"""A claim's lease renewal: ``False`` once the lease is lost."""


class Runs(Protocol):
    """What the pipeline offers a policy's ``run``, for one claimed delivery."""

    @property
    def inbox(self) -> Inbox:
        """The delivery's inbox, bound to its connection."""
        ...

    @property
    def started(self) -> float:
        """``time.monotonic()`` when the delivery was received."""
        ...

    def run(self, event: Event, budget: float | None = None) -> Outcome:
        """Run the delivery's handler for ``event`` under the delivery's claim and record it."""
        ...

    def run_other(self, event: Event, budget: float) -> str:
        """Claim ``event``'s own key on the delivery's connection, run and record it; the kind
        it ended as (``taken``: a delivery elsewhere holds or finished it)."""
        ...

    def finish(self, verdict: Verdict) -> Outcome:
        """Record ``verdict`` as the delivery's outcome."""
        ...


class Policy:
    """A route's rules around the claim; every hook here leaves the delivery as it is."""

    def early(self, event: Event) -> Outcome | None:
        """An answer given before anything is read or written (nothing is recorded)."""
        return None

    def waiting(self, event: Event, inbox: Inbox) -> Outcome | None:
        """An answer read before the claim, with nothing written (retried later)."""
        return None

    def stale(self, event: Event, inbox: Inbox) -> str:
        """Why the claimed event is recorded ``skipped`` without a run, or ``""``."""
        return ""

    def hold(self, event: Event, claim: Claim, inbox: Inbox) -> Verdict | None:
        """After the claim: a verdict that ends the delivery unrun, or ``None`` once whatever
        the run must hold is held (``release`` lets it go)."""
        return None

    def release(self, event: Event, inbox: Inbox) -> None:
        """Let go what ``hold`` took; called once the run is over, however it ended."""

    def run(self, event: Event, runs: Runs) -> Outcome:
        """The delivery's run: the handler's, and whatever runs the policy owes before it."""
        return runs.run(event)

    def renewing(self, event: Event, inbox: Inbox, renew: Renew) -> Renew:
        """The renewal of the claim's lease while the handler runs, and of what it holds."""
        return renew

    def after_run(self, event: Event, outcome: Outcome, inbox: Inbox, record_by: float) -> None:
        """What a recorded run completes beside its row (``record_by``: the delivery's
        deadline for writing, in ``time.monotonic()``)."""

    def answer(self, event: Event, verdict: Verdict, recorded: Outcome) -> Outcome:
        """The answer to a verdict reached before the run, once recorded as ``recorded``."""
        return recorded

    def unroutable(self, event: Event) -> str:
        """Why no handler runs ``event``."""
        return f"no handler for {event.route}"


Factory = Callable[[Settings, Clock, bool], Policy]
"""Builds a route's policy for one dispatcher: its settings, its clock, and whether it reruns
stored messages (an operator's replay, the re-drive)."""


def policies(
    factories: Mapping[str, Factory], settings: Settings, clock: Clock, rerun: bool
) -> Callable[[Event], Policy]:
    """Each route's policy, built once; ``Policy`` for a route that declared none."""
    built = {route: make(settings, clock, rerun) for route, make in factories.items()}
    neutral = Policy()
    return lambda event: built.get(event.route.value, neutral)
