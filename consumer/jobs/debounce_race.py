"""A write that may put a debounced job back to ``pending`` while a later job of its key is being
inserted by a transaction not yet committed (PostgreSQL; SQLite has one writer).

The write's own check (``queries.SUPERSEDED``) cannot see the uncommitted job, so the unique index
on pending debounce keys waits for that transaction and then refuses the write: the sweep's
whole batch would go unrecorded. Under a savepoint the write runs once more instead; the refusal
came after the later job committed, so the second run sees it and ends this job ``cancelled``.

The jobs table by epoch (migration ``0016_jobs_epochs``) has no index over both when the later
job is in a later epoch: the write first takes the debounce key's advisory lock, which that
enqueue holds too (its trigger ``jobs_earlier_epochs``), so it waits for the enqueue's commit and
then sees its job; an enqueue that comes second waits for the write's and folds into this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from consumer.db.dialect import POSTGRESQL

T = TypeVar("T")
PENDING_DEBOUNCE_INDEX = re.compile(r"jobs(_e\d+)?_debounce_(pending|key_epoch_idx)")
"""The pending debounce keys' index; on PostgreSQL by epoch, a partition's names its refusal: the
index the migration adopted (``jobs_e0_debounce_pending``) or one a new partition made."""
LOCK_DEBOUNCE_KEYS = text(
    "SELECT pg_advisory_xact_lock(hashtextextended('jobs.debounce_key:' || debounce_key, 0)) "
    "FROM jobs WHERE id = ANY(:ids) AND debounce_key IS NOT NULL ORDER BY debounce_key"
)
"""The debounce keys' transaction-scoped locks, in one order, before the write's snapshot: the
same lock as the trigger ``jobs_earlier_epochs`` takes (migration ``0016_jobs_epochs``)."""


def settled(
    connection: Connection, write: Callable[[], T], to_pending: bool, ids: Sequence[int]
) -> T:
    """``write()``, on PostgreSQL under a savepoint and run once more if the pending debounce
    keys' index refused it (any other error, or a second refusal, is raised). Only a write
    ``to_pending`` can meet that refusal: any other runs as it is, with no savepoint's round
    trips (a batch's record releases nothing, most failures are not debounced, done is done).
    ``ids``: the jobs ``write`` puts back to pending, whose debounce keys it locks first."""
    if not to_pending or connection.dialect.name != POSTGRESQL:
        return write()
    if ids:  # outside the savepoint: its rollback would let go of the locks
        connection.execute(LOCK_DEBOUNCE_KEYS, {"ids": list(ids)})
    try:
        with connection.begin_nested():
            return write()
    except IntegrityError as exc:
        if not PENDING_DEBOUNCE_INDEX.fullmatch(_constraint(exc) or ""):
            raise
    with connection.begin_nested():
        return write()


def _constraint(exc: IntegrityError) -> str | None:
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None)
