"""``FlowStore``: the flow-control statements of the sweep's claim (``consumer.jobs.flow``), run
on the claim's own connection, inside its transaction (``consumer.jobs.throttle`` decides with
them; ``consumer.jobs.flow_admin`` holds the operator's side).

A limited kind's every claim runs some of these, so on PostgreSQL the ones it runs each time are
prepared (``consumer.db.prepared``); they take the caller's connection as it is, as
``JobStore.claim_then`` does: the sweep already turns database faults into ``Unavailable``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from consumer.db.dialect import POSTGRESQL
from consumer.db.prepared import prepared
from consumer.db.store import Store
from consumer.jobs import flow

Params = dict[str, Any]
"""A claim's values: ``flow_kind`` and ``now`` (and ``first_shard``, ``last_shard`` to lock)."""


class FlowStore(Store):
    """Named flow-control statements over ``job_flow``, its shards and the running jobs."""

    def overrides(self, connection: Connection) -> dict[str, str]:
        """The operators' changes, by kind."""
        rows = connection.execute(flow.OVERRIDES).all()
        return {str(kind): str(text) for kind, text in rows}

    def peek(self, connection: Connection, params: Params) -> Any:
        """The kind's row ``(limits, tat)`` as last committed, without waiting (``None``: none)."""
        return connection.execute(flow.PEEK_ROW, params).first()

    def lock_row(self, connection: Connection, params: Params) -> Any:
        """The kind's row ``(limits, tat)``, locked to the end of the transaction (``None``:
        none yet). Prepared on PostgreSQL."""
        if self.dialect != POSTGRESQL:
            return connection.execute(flow.LOCK_ROW, params).first()
        return prepared(flow.lock_row, connection.dialect).first(connection, params)

    def lock_cap(self, connection: Connection, values: Params) -> Any:
        """PostgreSQL: ``flow.CAP_LOCK``'s row (the kind's row, its shards locked, the running
        jobs counted), or ``None``. Prepared."""
        return prepared(flow.cap_lock, connection.dialect).first(connection, values)

    def running(self, connection: Connection, params: Params) -> int:
        """The kind's jobs a live sweeper holds. Prepared on PostgreSQL."""
        if self.dialect != POSTGRESQL:
            return int(connection.execute(flow.RUNNING, params).scalar_one())
        return int(prepared(flow.running, connection.dialect).first(connection, params)[0])

    def ensure_rows(self, connection: Connection, params: Params) -> None:
        """The kind's row, and on PostgreSQL its shards, created if missing (its first claim)."""
        connection.execute(flow.ensure_row(self.dialect), params)
        if self.dialect == POSTGRESQL:
            connection.execute(flow.ensure_shards(self.dialect), params)

    def set_tat(self, connection: Connection, params: Params, tat: datetime | None) -> None:
        """The kind's rate state: its new theoretical arrival time."""
        connection.execute(flow.SET_TAT, {**params, "new_tat": tat})

    def any_due(self, connection: Connection, params: Params) -> bool:
        """Whether the kind has a claimable job (was a claim that took none held back, or idle?)."""
        return connection.execute(flow.ANY_DUE, params).first() is not None
