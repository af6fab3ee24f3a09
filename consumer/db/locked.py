"""PostgreSQL steps that lock a busy table: one ``DO`` block each, under ``lock_timeout``, tried a
few times, then left for a later run (the inbox's week partitions, the jobs' epochs).

A block is one transaction and one round trip, so a lock it takes is held for no client's
latency and no second request; writers queue behind a lock request only for the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from consumer.db.engine import sqlstate

LOCK_NOT_AVAILABLE = "55P03"
LEFT_DETACHED = "detached; its DROP is left for the next run"
NO_SEQSCAN = text("SET LOCAL enable_seqscan = off")
"""A survey or a check under a table's lock reads an index, whatever a young partition's
statistics say: a scan of a big partition would outlast a task's budget, and under the lock
stop every writer for its length."""


def block(lock_timeout: str, *statements: str) -> str:
    """``statements`` as one ``DO`` block, to run alone in autocommit, under ``lock_timeout``.
    Committed without waiting for the WAL's flush: a crash before it undoes the whole step (the
    next run does it again), and the next step's commit flushes it first."""
    body = "".join(f"    {statement};\n" for statement in statements)
    return (
        "DO $locked$ BEGIN\n"
        f"    PERFORM set_config('lock_timeout', '{lock_timeout}', true);\n"
        "    PERFORM set_config('synchronous_commit', 'off', true);\n"
        f"{body}END $locked$"
    )


def tried(engine: Engine, statement: str, tries: int, rest_seconds: float) -> bool:
    """``statement`` (a ``DO`` block) alone in autocommit, tried ``tries`` times while its lock
    is not granted, resting ``rest_seconds`` times the try's number between tries; whether it
    ran. Any other error is raised."""
    for attempt in range(tries):
        try:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql(statement)
            return True
        except OperationalError as exc:
            if sqlstate(exc) != LOCK_NOT_AVAILABLE:
                raise
        if attempt + 1 < tries:
            time.sleep(rest_seconds * (attempt + 1))
    return False


def dropped(
    engine: Engine, names: Iterable[str], lock_timeout: str, tries: int, rest_seconds: float
) -> dict[str, str]:
    """Detached partitions dropped, each a step of its own that locks only the table nobody reads
    any more; those whose lock was not granted, with why (the next run drops them)."""
    left = {}
    for name in names:
        statement = block(lock_timeout, f'DROP TABLE IF EXISTS "{name}"')
        if not tried(engine, statement, tries, rest_seconds):
            left[name] = LEFT_DETACHED
    return left
