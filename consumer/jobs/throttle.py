"""The sweep's claim under flow control: each limited kind is claimed on its own and keeps at
most what its cap and rate allow now; every other kind keeps the plain claim
(``JobStore.claim``), unchanged and at its cost. A limited kind's claim takes its jobs, then locks
and counts (``consumer.jobs.flow_lock``, which says why) and gives back what its limits do not
allow; its statements are ``FlowStore``'s (``consumer.jobs.flow_store``).

A kind held back is *throttled*: its jobs stay due (no attempt is used), the claim moves on to
the other kinds, and ``held`` says which kinds and why (``cap``, ``rate``, ``group_cap``,
``group_rate``). Group caps and rates are ``consumer.jobs.groups``'.
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.config.flow import JobLimit
from consumer.db.dialect import POSTGRESQL
from consumer.jobs import flow, limits
from consumer.jobs.flow_lock import FlowLocks, Locked
from consumer.jobs.flow_store import FlowStore, Params
from consumer.jobs.group_flow import GroupFlowStore
from consumer.jobs.groups import GroupLimits
from consumer.jobs.model import Job, claim_order
from consumer.jobs.slots import StartSlots
from consumer.jobs.store import JobStore
from consumer.observe import metrics
from consumer.wire.timeutil import Clock, utcnow

# How stale a sweeper's view of operators' changes may be for a kind it does not limit yet (a
# limited kind reads its row, fresh, in every claim); how long, at random up to twice this, a
# sweeper held only by caps waits before it claims again, and the random part added to the wait
# for a rate's next start (so the sweepers do not all come back at once); each wait that ends in
# another empty claim doubles the random part, up to 2**3 times (of many idle sweepers, few keep
# polling a kind that others keep busy).
REFRESH_SECONDS, CAP_POLL_SECONDS, RATE_POLL_JITTER, MAX_BACKOFF = 1.0, 0.1, 0.05, 3


class Throttle:
    """One sweeper's flow control: ``claim`` in place of ``JobStore.claim``, ``wait`` between
    claims that left only throttled work, ``start_at`` before each job."""

    def __init__(
        self, store: JobStore, configured: Mapping[str, JobLimit], clock: Clock = utcnow
    ) -> None:
        self.store = store
        self.flows = FlowStore(store.engine)
        self.configured = dict(configured)
        self.clock = clock
        self.locks = FlowLocks(self.flows, self.configured)
        self.slots = StartSlots()
        self.groups = GroupLimits(GroupFlowStore(store.engine), self.slots, store, clock)
        self.start_at = self.slots.start_at
        """Wait for a claimed job's start slot (``StartSlots.start_at``)."""
        self.overrides: dict[str, str] = {}
        self._refreshed = float("-inf")
        self.held: dict[str, str] = {}
        """The kinds the last claim left due jobs of, and why (``cap`` or ``rate``)."""
        self._rate_wait: float | None = None
        self._took: set[str] = set()
        self._took_before: set[str] = set()
        """The kinds the previous claim took jobs of (it skips the glance for them)."""
        self._misses = 0

    def claim(
        self,
        connection: Connection,
        token: str,
        size: int,
        kinds: Collection[str],
        now: datetime,
        lease_until: datetime,
    ) -> list[Job]:
        """Up to ``size`` jobs of ``kinds``: the limited kinds' first, each within its limits,
        then the other kinds' in one plain claim."""
        self.held, self._rate_wait = {}, None
        self.groups.held, self.groups.rate_wait = self.held, None
        self._took_before, self._took = self._took, set()
        if self._took_before:
            self._misses = 0
        limited = self._limited(connection, kinds)
        if not limited:
            return self.store.claim(token, size, kinds, now, lease_until, connection=connection)

        parts: list[list[Job]] = []
        claimed = 0
        for kind in sorted(limited):
            if claimed >= size:
                break
            args = (connection, kind, limited[kind], token, size - claimed, now, lease_until)
            parts.append(self._claim_limited(*args))
            claimed += len(parts[-1])
        rest = [kind for kind in kinds if kind not in limited]
        if rest and claimed < size:
            parts.append(
                self.store.claim(
                    token, size - claimed, rest, now, lease_until, connection=connection
                )
            )
        nonempty = [part for part in parts if part]
        if len(nonempty) == 1:
            return nonempty[0]  # one claim's jobs, in the store's order already
        return sorted((job for part in nonempty for job in part), key=claim_order)

    def wait(self, until: float) -> bool:
        """After a claim that took nothing: if it held kinds back, wait until one may start
        again (at most until ``until``, a ``time.monotonic()`` value) and say so; else False."""
        if not self.held:
            return False
        spread = 2 ** min(self._misses, MAX_BACKOFF)
        waits = [w for w in (self._rate_wait, self.groups.rate_wait) if w is not None]
        if waits:
            pause = min(waits) + random.uniform(0, RATE_POLL_JITTER * spread)
        else:
            pause = CAP_POLL_SECONDS * random.uniform(1, 2) * spread
        self._misses += 1
        if time.monotonic() + pause >= until:
            return False
        time.sleep(pause)
        return True

    def left(self, due: Mapping[str, int]) -> dict[str, int]:
        """The due jobs of the kinds the last claim held back, by kind."""
        return {kind: due[kind] for kind in sorted(self.held) if due.get(kind)}

    def _limited(self, connection: Connection, kinds: Collection[str]) -> dict[str, JobLimit]:
        """The kinds among ``kinds`` with a cap or a rate, configured or set by an operator."""
        if time.monotonic() - self._refreshed >= REFRESH_SECONDS:
            self.overrides = self.flows.overrides(connection)
            self._refreshed = time.monotonic()
        limited = {}
        for kind in set(self.configured).union(self.overrides).intersection(kinds):
            limit = limits.effective(
                self.configured.get(kind, JobLimit()), self.overrides.get(kind)
            )
            if limit.limited:
                limited[kind] = limit
        return limited

    def _claim_limited(
        self,
        connection: Connection,
        kind: str,
        limit: JobLimit,
        token: str,
        size: int,
        now: datetime,
        lease_until: datetime,
    ) -> list[Job]:
        """One limited kind's claim: claim and lock (``_claim_locked``), count, and give back
        what the limits do not allow. A sweeper that took none of the kind last time glances
        first, without the lock: a kind at its cap or rate is held back without a claim to give
        back."""
        params = {"flow_kind": kind, "now": now}
        want = min(size, limits.most_per_claim(limit))
        if kind not in self._took_before or want == 0:
            peeked = self.flows.peek(connection, params)
            glance = self._allowance(connection, peeked, params, size)
            if glance.allowed == 0:
                self._hold_if_due(connection, params, glance, now)
                return []
            want = min(want, glance.allowed)
        claimed, locked_row = self._claim_locked(
            connection, params, limit, token, want, lease_until
        )
        if locked_row is None:
            return []
        now = params["now"] = self.clock()  # the lock may have been waited for: slots from now
        found, counted, reserve = locked_row
        locked = self._allowance(connection, found, params, size, len(claimed), counted, reserve)
        if locked.limit.rate is not None and limit.rate is None and counted is not None:
            # An operator set a rate since this sweeper last read the changes: the rate's state
            # is the kind's row's, not locked here. The next claim reads the change first.
            self._refreshed = float("-inf")
            locked = locked._replace(allowed=0, reason="rate")
        claimed = self._give_back(connection, token, claimed, locked.allowed, now)
        if limit.grouped:  # each group within its cap and rate (``GroupLimits.keep``)
            took = len(claimed)
            claimed = self.groups.keep(connection, kind, limit, claimed, now, token, took < want)
        rate, tat = locked.limit.rate, locked.tat
        if rate is not None and claimed:
            slots = limits.slots(rate, tat, now, len(claimed))
            self.slots.schedule(claimed, slots, now, rate.interval)
            tat = limits.advanced(rate, tat, now, len(claimed))
            self.flows.set_tat(connection, params, tat)
        if claimed:
            self._took.add(kind)
        if len(claimed) >= min(want, locked.allowed):
            self._hold_if_due(connection, params, locked._replace(tat=tat), now, bool(claimed))
        return claimed

    def _claim_locked(
        self,
        connection: Connection,
        params: Params,
        limit: JobLimit,
        token: str,
        want: int,
        lease_until: datetime,
    ) -> tuple[list[Job], Locked | None]:
        """Claim up to ``want`` jobs of the kind (``SKIP LOCKED``, beside its other claims),
        then lock what its limits need (``FlowLocks``); the lock is held for the count only,
        not for the claim. Nothing claimed: ``([], None)``."""
        kind, now = params["flow_kind"], params["now"]
        excluded = self.groups.excluded(connection, kind, limit, now) if limit.grouped else []
        if self.store.dialect == POSTGRESQL and limit.rate is None and limit.cap is not None \
                and not limit.grouped:  # fmt: skip
            # A cap alone: the claim and the lock travel together (one round trip).
            values = self.locks.cap_values(params, limit.cap, want)
            claimed, row = self.store.claim_then(
                token, want, kind, now, lease_until, flow.cap_lock, values, connection
            )
            if not claimed:
                return [], None
            locked = self.locks.cap_locked(values, row, None)
        else:
            if want <= 0:
                return [], None
            claimed = self.store.claim(
                token, want, [kind], now, lease_until, connection=connection, excluded=excluded
            )
            if not claimed:
                self.groups.held_if_due(connection, kind, now)
                return [], None
            locked = self.locks.lock(connection, params, limit, len(claimed))
        if locked is None:
            # The kind's first claim ever. (Not on every claim: an insert that meets the row
            # while another claim holds it locked waits for that claim, as the lock does.)
            self.flows.ensure_rows(connection, params)
            locked = self.locks.lock(connection, params, limit, len(claimed))
            assert locked is not None
        return claimed, locked

    def _give_back(
        self, connection: Connection, token: str, claimed: list[Job], allowed: int, now: datetime
    ) -> list[Job]:
        """The first ``allowed`` of ``claimed`` (in claim order); the rest pending again, with
        no attempt used."""
        if allowed >= len(claimed):
            return claimed
        ordered = sorted(claimed, key=claim_order)
        kept, back = ordered[: max(0, allowed)], [job.id for job in ordered[max(0, allowed) :]]
        if back:
            self.store.complete(token, now, released=back, connection=connection)
        return kept

    def _allowance(
        self,
        connection: Connection,
        found: Any,
        params: Params,
        size: int,
        own: int = 0,
        counted: int | None = None,
        reserve: int = 0,
    ) -> limits.Allowance:
        """What the kind's limits allow now, from its row ``found`` (locked or not, ``None``:
        none yet); ``own``: running jobs of the kind this claim took, not counted against it;
        ``counted``: the running jobs the lock's statement counted (``None``: count them);
        ``reserve``: room to keep under the cap for others' uncommitted claims."""
        override, tat = found if found is not None else (None, None)
        limit = limits.effective(self.configured.get(params["flow_kind"], JobLimit()), override)
        allowed, reason = size, ""
        if limit.cap is not None:
            if counted is None:
                counted = self.locks.running(connection, params)
            running = counted - own
            by_cap = limits.cap_allowance(limit.cap, running + reserve)
            allowed, reason = (by_cap, "cap") if by_cap < allowed else (allowed, reason)
        if limit.rate is not None:
            by_rate = limits.rate_allowance(limit.rate, tat, params["now"])
            allowed, reason = (by_rate, "rate") if by_rate < allowed else (allowed, reason)
        return limits.Allowance(allowed, reason, limit, tat)

    def _hold_if_due(
        self,
        connection: Connection,
        params: Params,
        allowance: limits.Allowance,
        now: datetime,
        took: bool = False,
    ) -> None:
        """Record the kind as held back if its limits did hold jobs back: it has due jobs (taken
        for granted after a claim that took all it was allowed, saving a statement)."""
        if not allowance.reason:
            return
        if not took and not self.flows.any_due(connection, params):
            return
        self.held[params["flow_kind"]] = allowance.reason
        metrics.claim_throttled(params["flow_kind"], allowance.reason)
        rate = allowance.limit.rate
        if allowance.reason == "rate" and rate is not None:
            wait = limits.next_start(rate, allowance.tat, now)
            self._rate_wait = wait if self._rate_wait is None else min(self._rate_wait, wait)
