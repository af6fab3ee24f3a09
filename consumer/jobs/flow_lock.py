"""What a limited kind's claim locks before it counts (``consumer.jobs.throttle`` claims with it).

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
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC
from typing import Any, NamedTuple

from sqlalchemy import Connection

from consumer.config.flow import JobLimit
from consumer.db.dialect import POSTGRESQL
from consumer.jobs import flow, limits
from consumer.jobs.flow_store import FlowStore, Params

SHARD_RESERVE = (flow.SHARDS - 1) * limits.CAPPED_CLAIM_MOST
"""Room a claim holding one shard of a capped kind keeps under the cap: the most the claims
holding the other shards may take and not have committed yet."""


class Locked(NamedTuple):
    """What a claim locked: the kind's row ``(limits, tat)``, the running jobs counted once
    locked (``None``: not counted), and the room to keep for others' uncommitted claims."""

    found: tuple[Any, Any] | None
    counted: int | None
    reserve: int


class FlowLocks:
    """One sweeper's locks and counts of its limited kinds, remembering the last count of each
    (it decides how many shards the next claim of the kind locks)."""

    def __init__(self, store: FlowStore, configured: Mapping[str, JobLimit]) -> None:
        self.store = store
        self.configured = configured
        self.counted: dict[str, int] = {}
        """The running jobs of each capped kind as this sweeper last counted them."""

    def lock(
        self, connection: Connection, params: Params, limit: JobLimit, own: int
    ) -> Locked | None:
        """Lock what the kind's limits need (``None``: its rows are not there yet). A rate: the
        kind's row, for its state. A cap, on PostgreSQL: one of the kind's shards while the
        cap leaves room for the claims holding the others, else all of them; the running jobs
        are counted in the same statement, once locked."""
        if self.store.dialect != POSTGRESQL:
            row = self.store.lock_row(connection, params)
            return None if row is None else Locked((row[0], row[1]), None, 0)
        found, cap = None, limit.cap
        if limit.rate is not None:
            row = self.store.lock_row(connection, params)
            if row is None:
                return None
            found = (row[0], row[1] and row[1].astimezone(UTC))
            configured = self.configured.get(params["flow_kind"], JobLimit())
            cap = limits.effective(configured, row[0]).cap
        if cap is None:
            return Locked(found, None, 0)
        values = self.cap_values(params, cap, own)
        return self.cap_locked(values, self.store.lock_cap(connection, values), found)

    def cap_values(self, params: Params, cap: int, own: int) -> Params:
        """``flow.CAP_LOCK``'s values: one shard at random if, by the last count this sweeper
        saw, the cap leaves room for ``own`` jobs and for what the other shards' holders may be
        committing; else all of them (near the cap, claims of the kind go one at a time)."""
        last = self.counted.get(params["flow_kind"])
        if last is None or last + own + SHARD_RESERVE > cap:
            return {**params, "first_shard": 0, "last_shard": flow.SHARDS - 1}
        shard = random.randrange(flow.SHARDS)
        return {**params, "first_shard": shard, "last_shard": shard}

    def cap_locked(self, values: Params, row: Any, found: tuple[Any, Any] | None) -> Locked | None:
        """What ``flow.CAP_LOCK`` returned (``None``: the kind's rows are not there yet)."""
        if row is None or row[2] is None:
            return None
        self.counted[values["flow_kind"]] = counted = int(row[2])
        if found is None:
            found = (row[0], row[1] and row[1].astimezone(UTC))
        one = values["first_shard"] == values["last_shard"] and flow.SHARDS > 1
        return Locked(found, counted, SHARD_RESERVE if one else 0)

    def running(self, connection: Connection, params: Params) -> int:
        """The kind's running jobs, counted now (and remembered)."""
        self.counted[params["flow_kind"]] = running = self.store.running(connection, params)
        return running
