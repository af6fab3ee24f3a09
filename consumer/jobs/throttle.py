"""The sweep's claim under flow control: limited kinds are claimed one kind at a time under their
``job_flow`` row's lock, at most what their cap and rate allow now; every other kind keeps the
plain claim (``JobStore.claim``), unchanged and at its cost.

The lock is what makes a cap global without a coordinator: concurrent ``SKIP LOCKED`` claims do
not see each other's uncommitted rows, so two of them could each count one running job under a
cap of two and both take one. Locking the kind's row (``SELECT ... FOR UPDATE``) in the claim's
transaction serialises the claims of that kind: the next one reads the row only once this one
has committed, and then counts the jobs it took. The rows are locked in kind order, so two
claims never wait for each other in a circle. SQLite's single writer serialises claims already.

A kind held back is *throttled*: its jobs stay due (no attempt is used), the claim moves on to
the other kinds, and ``held`` says which kinds and why (``cap`` or ``rate``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Mapping
from datetime import datetime

from sqlalchemy import Connection

from consumer.config.flow import JobLimit
from consumer.jobs import flow, limits
from consumer.jobs.model import Job
from consumer.jobs.store import JobStore
from consumer.observe import metrics
from consumer.wire.timeutil import Clock, utcnow

REFRESH_SECONDS = 1.0
"""How stale a sweeper's view of the operators' changes may be for a kind it does not limit
yet (a limited kind reads its row, fresh, in every claim)."""
CAP_POLL_SECONDS = (0.05, 0.15)
"""How long a sweeper held only by caps waits before it claims again (random within, so the
sweepers do not all come back at once)."""
RATE_POLL_JITTER = 0.05
"""Added, at random up to this, to the wait for a rate's next start, for the same reason."""


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
        self._rows: set[str] = set()
        self.held: dict[str, str] = {}
        """The kinds the last claim left due jobs of, and why (``cap`` or ``rate``)."""
        self._rate_wait: float | None = None

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
        limited = self._limited(connection, kinds)
        if not limited:
            return self.store.claim(token, size, kinds, now, lease_until, connection=connection)
        claimed: list[Job] = []
        for kind in sorted(limited):
            if len(claimed) >= size:
                break
            args = (connection, kind, limited[kind], token, size - len(claimed), now, lease_until)
            claimed += self._claim_limited(*args)
        rest = [kind for kind in kinds if kind not in limited]
        if rest and len(claimed) < size:
            claimed += self.store.claim(
                token, size - len(claimed), rest, now, lease_until, connection=connection
            )
        return sorted(claimed, key=lambda job: (-job.priority, job.run_at, job.id))

    def wait(self, until: float) -> bool:
        """After a claim that took nothing: if it held kinds back, wait until one may start
        again (at most until ``until``, a ``time.monotonic()`` value) and say so; else False."""
        if not self.held:
            return False
        if self._rate_wait is not None:
            pause = self._rate_wait + random.uniform(0, RATE_POLL_JITTER)
        else:
            pause = random.uniform(*CAP_POLL_SECONDS)
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
        configured: JobLimit,
        token: str,
        size: int,
        now: datetime,
        lease_until: datetime,
    ) -> list[Job]:
        """One limited kind's claim, under its row's lock."""
        params = {"kind": kind, "now": now}
        if kind not in self._rows:
            connection.execute(flow.ensure_row(self.store.dialect), params)
            self._rows.add(kind)
        override, tat = connection.execute(flow.LOCK_ROW, params).one()
        limit = limits.effective(self.configured.get(kind, JobLimit()), override)
        allowed, reason = size, ""
        if limit.cap is not None:
            running = int(connection.execute(flow.RUNNING, params).scalar_one())
            by_cap = limits.cap_allowance(limit.cap, running)
            allowed, reason = (by_cap, "cap") if by_cap < allowed else (allowed, reason)
        if limit.rate is not None:
            by_rate = limits.rate_allowance(limit.rate, tat, now)
            if by_rate < allowed:
                allowed, reason = by_rate, "rate"
        claimed = self._take(connection, kind, token, allowed, now, lease_until)
        if limit.rate is not None and claimed:
            tat = limits.advanced(limit.rate, tat, now, len(claimed))
            connection.execute(flow.SET_TAT, {**params, "tat": tat})
        if reason and len(claimed) == allowed and self._due(connection, params):
            self._hold(kind, reason, limit, tat, now)
        return claimed

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

    def _due(self, connection: Connection, params: dict[str, object]) -> bool:
        """Whether jobs of the kind were left due (a claim that took all it was allowed may have
        taken the last of them)."""
        return connection.execute(flow.ANY_DUE, params).first() is not None

    def _hold(
        self, kind: str, reason: str, limit: JobLimit, tat: datetime | None, now: datetime
    ) -> None:
        self.held[kind] = reason
        metrics.claim_throttled(kind, reason)
        if reason == "rate" and limit.rate is not None:
            wait = limits.next_start(limit.rate, tat, now)
            self._rate_wait = wait if self._rate_wait is None else min(self._rate_wait, wait)
