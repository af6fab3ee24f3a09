"""The sweep's claim under flow control: each limited kind is claimed on its own and keeps at
most what its cap and rate allow now; every other kind keeps the plain claim
(``JobStore.claim``), unchanged and at its cost.

Locked rows are what make a cap global without a coordinator: concurrent ``SKIP LOCKED``
claims do not see each other's uncommitted rows, so two of them could each count one running job
under a cap of two and both take one. So a claim takes its jobs, then locks rows of the kind,
counts the running jobs (its own included) and gives back the excess. On PostgreSQL a capped
kind has ``flow.SHARDS`` shard rows: near the cap a claim locks them all, so the next claim
counts only once this one has committed; far from it a claim locks one and keeps room under the
cap for what the holders of the others may not have committed yet (``SHARD_RESERVE``), so such
claims commit side by side. The claim, the lock and the count travel in one round trip
(``flow.CAP_LOCK``: the count is taken once the shards are locked). A rate's state is the kind's
``job_flow`` row, locked before the shards; rows are locked in kind order, so two claims never
wait for each other in a circle. SQLite's single writer serialises claims already.

A kind held back is *throttled*: its jobs stay due (no attempt is used), the claim moves on to
the other kinds, and ``held`` says which kinds and why (``cap`` or ``rate``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection

from consumer.config.flow import JobLimit
from consumer.db.dialect import POSTGRESQL
from consumer.db.prepared import prepared
from consumer.jobs import flow, limits, queries
from consumer.jobs.model import Job, claim_order
from consumer.jobs.store import JobStore
from consumer.observe import metrics
from consumer.wire.timeutil import Clock, utcnow

REFRESH_SECONDS = 1.0
"""How stale a sweeper's view of the operators' changes may be for a kind it does not limit
yet (a limited kind reads its row, fresh, in every claim)."""
CAP_POLL_SECONDS = 0.1
"""How long, at random up to twice this, a sweeper held only by caps waits before it claims
again (so the sweepers do not all come back at once)."""
RATE_POLL_JITTER = 0.05
"""Added, at random up to this, to the wait for a rate's next start, for the same reason."""
MAX_BACKOFF = 3
"""Each wait that ends in another empty claim doubles the random part, up to ``2**3`` times:
of many idle sweepers, few keep polling a kind that others are keeping busy."""


SHARD_RESERVE = (flow.SHARDS - 1) * limits.CAPPED_CLAIM_MOST
"""Room a claim holding one shard of a capped kind keeps under the cap: the most the claims
holding the other shards may take and not have committed yet."""


class Locked(NamedTuple):
    """What a claim locked: the kind's row ``(limits, tat)``, the running jobs counted once
    locked (``None``: not counted), and the room to keep for others' uncommitted claims."""

    found: tuple[Any, Any] | None
    counted: int | None
    reserve: int


class Allowance(NamedTuple):
    """How many jobs of a kind a claim may take now, and which limit says so (``""``: none)."""

    allowed: int
    reason: str
    limit: JobLimit
    tat: datetime | None


class Throttle:
    """One sweeper's flow control: ``claim`` in place of ``JobStore.claim``, ``wait`` between
    claims that left only throttled work."""

    def __init__(
        self, store: JobStore, configured: Mapping[str, JobLimit], clock: Clock = utcnow
    ) -> None:
        self.store = store
        self.configured = dict(configured)
        self.clock = clock
        self.overrides: dict[str, str] = {}
        self._refreshed = float("-inf")
        self.held: dict[str, str] = {}
        """The kinds the last claim left due jobs of, and why (``cap`` or ``rate``)."""
        self._rate_wait: float | None = None
        self._took: set[str] = set()
        self._took_before: set[str] = set()
        """The kinds the previous claim took jobs of (it skips the glance for them)."""
        self._misses = 0
        self._slots: dict[int, tuple[float, float]] = {}
        """Claimed jobs of rate-limited kinds: when each may start (``time.monotonic()``), and
        the kind's interval."""
        self._last_start: dict[str, float] = {}
        self._counted: dict[str, int] = {}
        """The running jobs of each capped kind as this sweeper last counted them."""

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
        if self._rate_wait is not None:
            pause = self._rate_wait + random.uniform(0, RATE_POLL_JITTER * spread)
        else:
            pause = CAP_POLL_SECONDS * random.uniform(1, 2) * spread
        self._misses += 1
        if time.monotonic() + pause >= until:
            return False
        time.sleep(pause)
        return True

    def start_at(self, job: Job) -> None:
        """Wait for the start slot the rate gave ``job`` (none: start now), and at least an
        interval after this sweeper's previous start of the kind: a sweeper running behind its
        slots spaces its late starts instead of bunching them."""
        scheduled = self._slots.pop(job.id, None)
        if scheduled is None:
            return
        slot, interval = scheduled
        start = max(slot, self._last_start.get(job.kind, float("-inf")) + interval)
        if start > time.monotonic():
            time.sleep(start - time.monotonic())
        self._last_start[job.kind] = time.monotonic()

    def _schedule(
        self, claimed: list[Job], slots: list[datetime], now: datetime, interval: float
    ) -> None:
        base = time.monotonic()
        for job, slot in zip(sorted(claimed, key=lambda job: job.id), slots, strict=True):
            self._slots[job.id] = (base + (slot - now).total_seconds(), interval)

    def left(self, due: Mapping[str, int]) -> dict[str, int]:
        """The due jobs of the kinds the last claim held back, by kind."""
        return {kind: due[kind] for kind in sorted(self.held) if due.get(kind)}

    def _limited(self, connection: Connection, kinds: Collection[str]) -> dict[str, JobLimit]:
        """The kinds among ``kinds`` with a cap or a rate, configured or set by an operator."""
        if time.monotonic() - self._refreshed >= REFRESH_SECONDS:
            rows = connection.execute(flow.OVERRIDES).all()
            self.overrides = {str(kind): str(text) for kind, text in rows}
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
        """One limited kind's claim: claim (``SKIP LOCKED``, beside the kind's other claims),
        then lock the kind's row, count, and give back what the limits do not allow. The lock
        is held for the count only, not for the claim. A sweeper that took none of the kind last
        time glances first, without the lock: a kind at its cap or rate is held back without a
        claim to give back."""
        params = {"flow_kind": kind, "now": now}
        want = min(size, limits.most_per_claim(limit))
        if kind not in self._took_before or want == 0:
            peeked = connection.execute(flow.PEEK_ROW, params).first()
            glance = self._allowance(connection, peeked, params, size)
            if glance.allowed == 0:
                self._hold_if_due(connection, params, glance, now)
                return []
            want = min(want, glance.allowed)
        if self.store.dialect == POSTGRESQL and limit.rate is None and limit.cap is not None:
            # A cap alone: the claim and the lock travel together (one round trip).
            values = self._cap_values(params, limit.cap, want)
            claimed, row = self.store.claim_then(
                token, want, kind, now, lease_until, flow.cap_lock, values, connection
            )
            if not claimed:
                return []
            locked_row = self._cap_locked(values, row, None)
        else:
            claimed = self._take(connection, kind, token, want, now, lease_until)
            if not claimed:
                return []
            locked_row = self._lock(connection, params, limit, len(claimed))
        if locked_row is None:
            # The kind's first claim ever. (Not on every claim: an insert that meets the row
            # while another claim holds it locked waits for that claim, as the lock does.)
            connection.execute(flow.ensure_row(self.store.dialect), params)
            if self.store.dialect == POSTGRESQL:
                connection.execute(flow.ensure_shards(self.store.dialect), params)
            locked_row = self._lock(connection, params, limit, len(claimed))
            assert locked_row is not None
        now = params["now"] = self.clock()  # the lock may have been waited for: slots from now
        found, counted, reserve = locked_row
        locked = self._allowance(connection, found, params, size, len(claimed), counted, reserve)
        if locked.limit.rate is not None and limit.rate is None and counted is not None:
            # An operator set a rate since this sweeper last read the changes: the rate's state
            # is the kind's row's, not locked here. The next claim reads the change first.
            self._refreshed = float("-inf")
            locked = locked._replace(allowed=0, reason="rate")
        claimed = self._give_back(connection, token, claimed, locked.allowed, now)
        rate, tat = locked.limit.rate, locked.tat
        if rate is not None and claimed:
            self._schedule(claimed, limits.slots(rate, tat, now, len(claimed)), now, rate.interval)
            tat = limits.advanced(rate, tat, now, len(claimed))
            connection.execute(flow.SET_TAT, {**params, "new_tat": tat})
        if claimed:
            self._took.add(kind)
        if len(claimed) >= min(want, locked.allowed):
            self._hold_if_due(connection, params, locked._replace(tat=tat), now, bool(claimed))
        return claimed

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
            params = {"token": token, "now": now, "ids": back}
            connection.execute(queries.released(self.store.dialect), params)
        return kept

    def _lock(
        self, connection: Connection, params: dict[str, Any], limit: JobLimit, own: int
    ) -> Locked | None:
        """Lock what the kind's limits need (``None``: its rows are not there yet). A rate: the
        kind's row, for its state. A cap, on PostgreSQL: one of the kind's shards while the
        cap leaves room for the claims holding the others, else all of them; the running jobs
        are counted in the same statement, once locked. Prepared on PostgreSQL: a limited
        kind's every claim runs these."""
        if self.store.dialect != POSTGRESQL:
            row = connection.execute(flow.LOCK_ROW, params).first()
            return None if row is None else Locked((row[0], row[1]), None, 0)
        found, cap = None, limit.cap
        if limit.rate is not None:
            row = prepared(flow.lock_row, connection.dialect).first(connection, params)
            if row is None:
                return None
            found = (row[0], row[1] and row[1].astimezone(UTC))
            configured = self.configured.get(params["flow_kind"], JobLimit())
            cap = limits.effective(configured, row[0]).cap
        if cap is None:
            return Locked(found, None, 0)
        values = self._cap_values(params, cap, own)
        row = prepared(flow.cap_lock, connection.dialect).first(connection, values)
        return self._cap_locked(values, row, found)

    def _cap_values(self, params: dict[str, Any], cap: int, own: int) -> dict[str, Any]:
        """``flow.CAP_LOCK``'s values: one shard at random if, by the last count this sweeper
        saw, the cap leaves room for ``own`` jobs and for what the other shards' holders may be
        committing; else all of them (near the cap, claims of the kind go one at a time)."""
        last = self._counted.get(params["flow_kind"])
        if last is None or last + own + SHARD_RESERVE > cap:
            return {**params, "first_shard": 0, "last_shard": flow.SHARDS - 1}
        shard = random.randrange(flow.SHARDS)
        return {**params, "first_shard": shard, "last_shard": shard}

    def _cap_locked(
        self, values: dict[str, Any], row: Any, found: tuple[Any, Any] | None
    ) -> Locked | None:
        """What ``flow.CAP_LOCK`` returned (``None``: the kind's rows are not there yet)."""
        if row is None or row[2] is None:
            return None
        self._counted[values["flow_kind"]] = counted = int(row[2])
        if found is None:
            found = (row[0], row[1] and row[1].astimezone(UTC))
        one = values["first_shard"] == values["last_shard"] and flow.SHARDS > 1
        return Locked(found, counted, SHARD_RESERVE if one else 0)

    def _running(self, connection: Connection, params: dict[str, Any]) -> int:
        if self.store.dialect != POSTGRESQL:
            running = int(connection.execute(flow.RUNNING, params).scalar_one())
        else:
            running = int(prepared(flow.running, connection.dialect).first(connection, params)[0])
        self._counted[params["flow_kind"]] = running
        return running

    def _allowance(
        self,
        connection: Connection,
        found: Any,
        params: dict[str, Any],
        size: int,
        own: int = 0,
        counted: int | None = None,
        reserve: int = 0,
    ) -> Allowance:
        """What the kind's limits allow now, from its row ``found`` (locked or not, ``None``:
        none yet); ``own``: running jobs of the kind this claim took, not counted against it;
        ``counted``: the running jobs the lock's statement counted (``None``: count them);
        ``reserve``: room to keep under the cap for others' uncommitted claims."""
        override, tat = found if found is not None else (None, None)
        limit = limits.effective(self.configured.get(params["flow_kind"], JobLimit()), override)
        allowed, reason = size, ""
        if limit.cap is not None:
            if counted is None:
                counted = self._running(connection, params)
            running = counted - own
            by_cap = limits.cap_allowance(limit.cap, running + reserve)
            allowed, reason = (by_cap, "cap") if by_cap < allowed else (allowed, reason)
        if limit.rate is not None:
            by_rate = limits.rate_allowance(limit.rate, tat, params["now"])
            allowed, reason = (by_rate, "rate") if by_rate < allowed else (allowed, reason)
        return Allowance(allowed, reason, limit, tat)

    def _take(
        self,
        connection: Connection,
        kind: str,
        token: str,
        allowed: int,
        now: datetime,
        lease_until: datetime,
    ) -> list[Job]:
        if allowed <= 0:
            return []
        return self.store.claim(token, allowed, [kind], now, lease_until, connection=connection)

    def _hold_if_due(
        self,
        connection: Connection,
        params: dict[str, Any],
        allowance: Allowance,
        now: datetime,
        took: bool = False,
    ) -> None:
        """Record the kind as held back if its limits did hold jobs back: it has due jobs (taken
        for granted after a claim that took all it was allowed, saving a statement)."""
        if not allowance.reason:
            return
        if not took and connection.execute(flow.ANY_DUE, params).first() is None:
            return
        self.held[params["flow_kind"]] = allowance.reason
        metrics.claim_throttled(params["flow_kind"], allowance.reason)
        rate = allowance.limit.rate
        if allowance.reason == "rate" and rate is not None:
            wait = limits.next_start(rate, allowance.tat, now)
            self._rate_wait = wait if self._rate_wait is None else min(self._rate_wait, wait)
