"""Group caps and rates in the claim (``consumer.jobs.throttle`` calls it for a kind that has
one): the same rules as a kind's cap and rate (``consumer.jobs.limits``), held for each group of
the kind's jobs across every pod, with no coordinator.

Before the claim, the groups at their cap (a count of the kind's running grouped jobs) and those
whose rate allows no start yet are left out of it, so the other groups' jobs are claimed instead
of waiting behind them. After it, the rows of the groups the claim took are locked, in one order,
and their running jobs counted in a statement of its own (its snapshot holds what the claims
that held the rows before committed); what goes beyond a group's cap or rate is given back,
pending again with no attempt used. A rate's state is its group's row (``job_group_flow.tat``),
the same GCRA as a kind's; the sweeper starts each job at its group's slot.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import Connection

from consumer.config.flow import JobLimit
from consumer.jobs import limits
from consumer.jobs.group_flow import GroupFlowStore
from consumer.jobs.model import Job, claim_order
from consumer.jobs.slots import StartSlots
from consumer.jobs.store import JobStore
from consumer.observe import metrics
from consumer.wire.timeutil import Clock

EXTRA_LEAD = timedelta(seconds=0.05)
"""Added to the rate's lead (``limits.LEAD``) for a group's slots: a claim with group limits
runs more statements after it gives the slots (the rates' state, what it gives back) before it
commits, and a sweeper that reached its first slot late would bunch its starts with the next."""


SLOTS_PER_CLAIM = 1
"""A claim takes one slot of a rate-limited group (a job of each group it holds): a sweeper runs
its batch one job after another, so a second slot of the same group was often reached late, and a
late start bunched with another sweeper's start on time (a 1 s window held 56 starts at 50/s,
measured at the target). The groups of a claim still share it: one claim, many groups."""


class GroupLimits:
    """One sweeper's enforcement of its kinds' group caps and rates."""

    def __init__(
        self, store: GroupFlowStore, slots: StartSlots, jobs: JobStore, clock: Clock
    ) -> None:
        self.store = store
        self.clock = clock
        self.slots = slots
        self.jobs = jobs
        self.left_out: dict[str, list[str]] = {}
        """The groups of each kind the last claim left out."""
        self.held: dict[str, str] = {}
        """The kinds whose groups held jobs back in the last claim, and why."""
        self.rate_wait: float | None = None

    def excluded(
        self, connection: Connection, kind: str, limit: JobLimit, now: datetime
    ) -> list[str]:
        """The kind's groups a claim now would only give back: at their cap, or their rate
        allows no start within the claim's horizon."""
        out: set[str] = set()
        if limit.group_cap is not None:
            out |= self.store.full(connection, kind, now, limit.group_cap)
        if limit.group_rate is not None:
            ahead = self.store.ahead(connection, kind, now + EXTRA_LEAD + limits.HORIZON)
            out |= set(ahead)
            if ahead:  # a wait for the first of them to allow a start again
                first = min(ahead.values())
                self._rate_waits([limits.next_start(limit.group_rate, first, now + EXTRA_LEAD)])
        self.left_out[kind] = sorted(out)
        return self.left_out[kind]

    def held_if_due(self, connection: Connection, kind: str, now: datetime) -> None:
        """Record the kind held back if a group the claim left out has a due job."""
        left_out = self.left_out.get(kind)
        if left_out and self.store.any_due(connection, kind, now, left_out):
            self.held.setdefault(kind, "group")
            metrics.claim_throttled(kind, "group")

    def keep(
        self,
        connection: Connection,
        kind: str,
        limit: JobLimit,
        claimed: list[Job],
        now: datetime,
        token: str,
        fewer: bool,
    ) -> list[Job]:
        """Of ``claimed`` (by ``token``), what each group's cap and rate allow (its ungrouped
        jobs all); the rest is given back. ``fewer``: the claim took fewer than it wanted (were
        due jobs of groups it left out held back?)."""
        if fewer:
            self.held_if_due(connection, kind, now)
        by_group: dict[str, list[Job]] = defaultdict(list)
        for job in claimed:
            if job.group_key is not None:
                by_group[job.group_key].append(job)
        if not by_group:
            return claimed
        tats, counted = self.store.lock(connection, kind, now, sorted(by_group))
        now = self.clock()  # the rows may have been waited for: slots from now
        later = now + EXTRA_LEAD
        back: list[int] = []
        new_tats: dict[str, datetime] = {}
        for group, taken in by_group.items():
            taken.sort(key=claim_order)
            running = counted.get(group, 0) - len(taken)
            allowed, reason = self._allowed(limit, running, tats, group, later)
            kept = taken[: max(0, allowed)]
            back += [job.id for job in taken[len(kept) :]]
            if reason and len(kept) < len(taken):
                self.held[kind] = f"group_{reason}"
            rate = limit.group_rate
            if rate is not None and kept:
                tat = tats.get(group)
                slots = limits.slots(rate, tat, later, len(kept))
                self.slots.schedule(kept, slots, now, rate.interval, key=f"{kind}\0{group}")
                new_tats[group] = limits.advanced(rate, tat, later, len(kept))
            if rate is not None and reason == "rate":
                self._rate_waits(
                    [limits.next_start(rate, new_tats.get(group, tats.get(group)), later)]
                )
        self.store.set_tats(connection, kind, new_tats)
        if back:
            self.jobs.complete(token, now, released=back, connection=connection)  # no attempt
            returned = set(back)
            return [job for job in claimed if job.id not in returned]
        return claimed

    def _rate_waits(self, waits: list[float]) -> None:
        self.rate_wait = min(waits if self.rate_wait is None else [*waits, self.rate_wait])

    @staticmethod
    def _allowed(
        limit: JobLimit, running: int, tats: dict[str, datetime | None], group: str, now: datetime
    ) -> tuple[int, str]:
        """How many jobs the group may start now besides its ``running`` ones, and which limit
        says so (``""``: none)."""
        allowed, reason = 1 << 30, ""
        if limit.group_cap is not None:
            allowed, reason = max(0, limit.group_cap - running), "cap"
        if limit.group_rate is not None:
            by_rate = min(
                SLOTS_PER_CLAIM, limits.rate_allowance(limit.group_rate, tats.get(group), now)
            )
            if by_rate < allowed:
                allowed, reason = by_rate, "rate"
        return allowed, reason
