"""``Inbox``: the ``inbox`` table's queries (``consumer.inbox.queries``), run in the caller's
transaction when given its ``connection``, on the connection the inbox is bound to (``on``), or in
a transaction of their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from consumer.db import dialect as sql
from consumer.db.direct import Direct, direct
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.prepared import Prepared, on_autocommit, prepared
from consumer.db.store import BoundStore
from consumer.inbox import queries
from consumer.inbox.model import Claim, Holder, InboxRow, Status
from consumer.wire.message import PushMessage

T = TypeVar("T")


class Inbox(BoundStore):
    """Named queries over the ``inbox`` table. Besides the store's ``connection=`` (join the
    caller's transaction), an inbox can be bound to one connection (``on``): its statements then
    each run in a transaction of their own on that checkout."""

    def __init__(self, engine: Engine, connection: Connection | None = None) -> None:
        super().__init__(engine, connection)
        self._claim = prepared(queries.claim, engine.dialect)
        self._direct_claim = direct(queries.claim, engine.dialect)

    def _prepared(
        self,
        connection: Connection | None,
        statements: tuple[Prepared, Direct | None],
        run: Callable[[Prepared | Direct, Connection], T],
    ) -> T:
        """``run`` a prepared statement where ``_write`` would, except that on a bound
        connection in autocommit it runs alone: it commits itself, and SQLAlchemy's transaction
        block around it cost about 10 µs of CPU a statement; on PostgreSQL it then goes
        straight to libpq (``consumer.db.direct``). A call, not a context manager: every
        delivery passes here twice."""
        with unavailable_on_db_fault():  # the autocommit check may reconnect, and fail
            bound = self.connection
            if connection is None and bound is not None and on_autocommit(bound):
                return run(statements[1] or statements[0], bound)
        with self._write(connection) as conn:
            return run(statements[0], conn)

    def claim(
        self,
        key: str,
        route: str,
        message: PushMessage,
        now: datetime,
        lease: timedelta,
        *,
        connection: Connection | None = None,
    ) -> Claim | None:
        """Insert the key as running, or take over a failed or lease-expired row; ``None`` if
        another delivery holds it or it is finished."""
        token, lease_until = os.urandom(16).hex(), now + lease
        values = {
            "key": key, "route": route, "lease_until": lease_until, "claimed_by": token,
            "message_id": message.message_id, "message": message.to_json(), "now": now,
        }  # fmt: skip
        statements = (self._claim, self._direct_claim)
        row = self._prepared(connection, statements, lambda run, conn: run.first(conn, values))
        if row is None:
            return None
        # Inserted or taken over, the row's lease is the one bound here.
        stored_in = row[1] if len(row) > 1 else None  # PostgreSQL's partition
        return Claim(
            key=key, token=token, attempts=row[0], lease_until=lease_until, stored_in=stored_in
        )

    def finish(
        self,
        claim: Claim,
        status: Status,
        now: datetime,
        result: Any = None,
        error: str | None = None,
        refund_attempt: bool = False,
        *,
        connection: Connection | None = None,
    ) -> bool:
        """Record the outcome of a claim; ``False`` if the lease was lost meanwhile.
        ``refund_attempt``: the attempt made committed progress, so it does not count."""
        values = {
            "b_key": claim.key, "b_token": claim.token, "b_status": status, "b_result": result,
            "b_error": error, "b_now": now, "b_refund": int(refund_attempt),
        }  # fmt: skip
        build, dialect = queries.finish_in(claim.stored_in), self.engine.dialect
        statements = (prepared(build, dialect), direct(build, dialect))
        changed = self._prepared(
            connection, statements, lambda run, conn: run.rowcount(conn, values)
        )
        return changed == 1

    def finished_as(
        self, claim: Claim, status: Status, *, connection: Connection | None = None
    ) -> bool:
        """Whether this claim's own write already recorded ``status`` (a commit whose reply was
        lost looks like a lost lease to the retry)."""
        with self._read(connection) as conn:
            return conn.execute(queries.finished_as(claim, status)).first() is not None

    def heartbeat(
        self,
        claim: Claim,
        lease_until: datetime,
        now: datetime,
        *,
        connection: Connection | None = None,
    ) -> bool:
        """Extend the lease of a long handler; ``False`` if it was lost."""
        statement = queries.heartbeat(claim, lease_until, now)
        with self._write(connection) as conn:
            return conn.execute(statement).rowcount == 1

    def holder(self, key: str, *, connection: Connection | None = None) -> Holder | None:
        """What a delivery that could not claim ``key`` needs to know of the row that holds it,
        without reading its message (which may be megabytes): its status, the message id of the
        delivery it records, and that message's format."""
        with self._read(connection) as conn:
            row = conn.execute(queries.holder(key)).first()
        return None if row is None else Holder(Status(row[0]), row[1], row[2] or "")

    def get(self, key: str, *, connection: Connection | None = None) -> InboxRow | None:
        with self._read(connection) as conn:
            row = conn.execute(queries.by_key(key)).first()
        return InboxRow.from_row(row) if row else None

    def list(
        self,
        status: Status | None = None,
        limit: int = 50,
        *,
        connection: Connection | None = None,
    ) -> Sequence[InboxRow]:
        with self._read(connection) as conn:
            return [InboxRow.from_row(row) for row in conn.execute(queries.listed(status, limit))]

    def rearm(self, key: str, now: datetime, *, connection: Connection | None = None) -> bool:
        """Make a dead, unroutable or failed row claimable again with fresh attempts (replay).
        On PostgreSQL under the key's lock: a retirement carrying the row to this week's
        partition would otherwise fail this update with a serialization error."""
        with self._write(connection) as conn:
            if self.dialect == sql.POSTGRESQL:
                conn.execute(queries.key_locked(key))
            return conn.execute(queries.rearmed(key, now)).rowcount == 1

    def lapsed(
        self, before: datetime, limit: int, *, connection: Connection | None = None
    ) -> Sequence[str]:
        """Keys of ``running`` rows whose lease ran out before ``before``, longest lapsed first."""
        with self._read(connection) as conn:
            return conn.execute(queries.lapsed(before, limit)).scalars().all()

    def bury(
        self, key: str, now: datetime, error: str, *, connection: Connection | None = None
    ) -> bool:
        """Record a lapsed ``running`` row ``dead`` (its message can no longer run); ``False``
        if a delivery took it over first."""
        with self._write(connection) as conn:
            return conn.execute(queries.buried(key, now, error)).rowcount == 1

    def purge(
        self,
        finished_before: datetime,
        limit: int | None = None,
        *,
        connection: Connection | None = None,
    ) -> int:
        """Delete finished rows, failed rows nobody retried, and running rows whose lease ran
        out, older than the retention; at most ``limit`` in one transaction (callers loop, so no
        lock is held past a deadline)."""
        with self._write(connection) as conn:
            return conn.execute(queries.purged(finished_before, limit)).rowcount
