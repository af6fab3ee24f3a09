"""Bulk enqueue: many jobs of one kind in one set-based insert (file imports, ``jobs enqueue
--from``).

A row is ``(idempotency key, payload as JSON text)``: callers have already serialized the
payload to check its size, so it is never encoded twice. On PostgreSQL the rows are ``COPY``-ed
into a temporary stage and moved into ``jobs`` by one ``INSERT ... SELECT``, the statement a
multi-row ``INSERT`` would be, without the driver parsing thousands of parameters: the unique key
index decides duplicates, in the caller's transaction (first without ``ON CONFLICT``, which costs
a third of the database's time per row, and with it only when a key is taken). SQLite has no
``COPY``; one prepared ``INSERT`` run for every row is its fast path.

``enqueue_many`` on PostgreSQL takes the same route for ``NewJob`` values, each with its own
kind, priority, due time, attempts and lock key (``insert_new_jobs``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, TextClause
from sqlalchemy.exc import IntegrityError

from consumer.db.engine import unavailable_on_db_fault
from consumer.db.prepared import autocommits, translated
from consumer.jobs.bulk_queries import (
    COPY_NEW_STAGE,
    COPY_STAGE,
    CREATE_NEW_STAGE,
    CREATE_STAGE,
    INSERT_ONE,
    INSERT_STAGE,
    KEYS_CHECKED,
    MOVE_NEW_STAGE,
    MOVE_STAGE,
    QUIET_NOTIFY,
    RELAX_COMMIT,
)
from consumer.jobs.model import InvalidJob, NewJob, Status
from consumer.wire.timeutil import utcnow

INT32 = (-(1 << 31), (1 << 31) - 1)
"""``jobs.priority`` and ``jobs.max_attempts`` are 32-bit columns: checked before SQL is."""

UNIQUE_VIOLATION = "23505"
BulkRow = tuple[str | None, str]
"""(idempotency key or ``None``, the payload as JSON text)."""


@dataclass(frozen=True)
class JobTemplate:
    """What every job of one bulk insert shares."""

    kind: str
    priority: int = 0
    max_attempts: int | None = None
    run_at: datetime | None = None

    def __post_init__(self) -> None:
        NewJob(self.kind, None, None, self.run_at, self.priority, self.max_attempts)
        low, high = INT32
        if not low <= self.priority <= high:
            raise InvalidJob(f"priority must be in {low}..{high}")
        if self.max_attempts is not None and self.max_attempts > high:
            raise InvalidJob(f"max_attempts must be at most {high}")


class BulkBatch:
    """Rows gathered for one ``insert_batch``. For PostgreSQL each row is turned into its line of
    ``COPY`` text as it is added, in the thread that reads the file: the insert then sends one
    string, so a writer thread holds the GIL for almost nothing while the reader goes on."""

    def __init__(self, dialect: str) -> None:
        self.copy = dialect == "postgresql"
        self.items: list[Any] = []

    def add(self, key: str | None, payload: str) -> None:
        if self.copy:
            self.items.append(f"{_copy_text(key)}\t{_copy_text(payload)}\n")
        else:
            self.items.append((key, payload))

    def __len__(self) -> int:
        return len(self.items)


def _copy_text(value: str | None) -> str:
    r"""A value in ``COPY``'s text format: ``\N`` is NULL; backslash, tab, newline and carriage
    return are escaped (payload JSON holds backslashes only: JSON escapes control characters)."""
    if value is None:
        return "\\N"
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def insert_jobs(connection: Connection, template: JobTemplate, rows: Sequence[BulkRow]) -> int:
    """``insert_batch`` of ``rows``."""
    batch = BulkBatch(connection.dialect.name)
    for key, payload in rows:
        batch.add(key, payload)
    return insert_batch(connection, template, batch)


def insert_batch(
    connection: Connection,
    template: JobTemplate,
    batch: BulkBatch,
    relaxed: bool = False,
    now: datetime | None = None,
) -> int:
    """Insert the batch as pending jobs in the caller's transaction; rows whose key exists
    (among unfinished or finished jobs, or earlier in the batch) are skipped. Returns how many
    were inserted. ``relaxed``: the transaction's commit need not wait for the disk (see
    ``RELAX_COMMIT``; PostgreSQL only). ``now`` (default: the wall clock) stamps the rows, and
    is when they are due unless the template says otherwise."""
    if not batch.items:
        return 0
    now = now or utcnow()
    params = {
        "kind": template.kind, "status": Status.PENDING.value, "priority": template.priority,
        "run_at": template.run_at or now, "max_attempts": template.max_attempts, "now": now,
    }  # fmt: skip
    with unavailable_on_db_fault():
        if batch.copy:
            create = f"{CREATE_STAGE}; {QUIET_NOTIFY}" + (f"; {RELAX_COMMIT}" if relaxed else "")
            stage = (create, COPY_STAGE, MOVE_STAGE)
            text = "".join(batch.items)
            return _copy_and_move(connection, text, params, stage, first_try=INSERT_STAGE)
        return _insert_each(connection, batch.items, params)


def insert_new_jobs(
    connection: Connection, new_jobs: Sequence[NewJob], now: datetime, trace_parent: str | None
) -> int:
    """PostgreSQL: ``new_jobs`` as pending jobs in the caller's transaction, in their order; a
    job whose key exists (among unfinished or finished jobs, or earlier in ``new_jobs``) is
    skipped. Returns how many were inserted. ``now`` stamps them and is when they are due
    unless they say otherwise. Payloads are encoded as the ``JSON`` column encodes them."""
    dumps = getattr(connection.dialect, "_json_serializer", None) or json.dumps
    lines = [
        "\t".join([str(line), *map(_copy_field, new_job_fields(job, dumps(job.payload)))])
        for line, job in enumerate(new_jobs)
    ]
    lines.append("")
    params = {"status": Status.PENDING.value, "now": now, "trace_parent": trace_parent}
    stage = (CREATE_NEW_STAGE, COPY_NEW_STAGE, MOVE_NEW_STAGE)
    return _copy_and_move(connection, "\n".join(lines), params, stage)


def new_job_fields(job: NewJob, payload: str) -> tuple[Any, ...]:
    """The values ``job`` sets for itself, in ``NEW_JOB_STAGE``'s order (``payload``: its JSON)."""
    return (job.kind, payload, job.priority, job.run_at, job.max_attempts, job.key, job.lock_key,
            job.group)  # fmt: skip


def _copy_field(value: Any) -> str:
    """A value in ``COPY``'s text format: text escaped, times in UTC, ``None`` as NULL."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return _copy_text(value)
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value)


Stage = tuple[str, str, TextClause]
"""A stage's ``CREATE`` (and any setting of the transaction), its ``COPY`` and its move."""


def _copy_and_move(
    connection: Connection,
    text: str,
    params: dict[str, Any],
    stage: Stage,
    first_try: TextClause | None = None,
) -> int:
    """COPY into the session's stage, then one ``INSERT ... SELECT`` (``first_try`` first, under
    a savepoint, when given: see ``_move``), which looks the keys up in the earlier epochs
    itself (``bulk_queries.KEYS_CHECKED`` is on while it runs). The driver connection is the one
    the caller's transaction runs on, so every statement is inside it; a driver in autocommit
    gets a transaction around them (each would commit, emptying the stage)."""
    create, copy_rows, move = stage
    driver = connection.connection.dbapi_connection
    assert driver is not None
    block = driver.transaction() if autocommits(driver) else nullcontext()
    with block:
        try:
            with driver.cursor() as cursor:  # type: ignore[attr-defined]
                cursor.execute(f"{create}; {KEYS_CHECKED.format('on')}")
                with cursor.copy(copy_rows) as copy:
                    copy.write(text)
        except connection.dialect.loaded_dbapi.Error as exc:  # a cut: Unavailable, as any statement
            raise translated(connection, driver, copy_rows, None, exc) from exc
        moved = _move(connection, params, move, first_try)
        connection.exec_driver_sql(KEYS_CHECKED.format("off"))  # the caller's inserts: checked
        return moved


SAVEPOINT = "jobs_first_try"


def _move(
    connection: Connection, params: dict[str, Any], move: TextClause, first_try: TextClause | None
) -> int:
    """``first_try`` (a move with no ``ON CONFLICT``), and only if a key is taken (it then fails
    whole, rolled back to its savepoint), ``move``: the unique index decides duplicates either
    way, and the cheaper statement serves the usual batch, all of whose keys are new."""
    if first_try is not None:
        connection.exec_driver_sql(f"SAVEPOINT {SAVEPOINT}")
        try:
            inserted = connection.execute(first_try, params).rowcount
        except IntegrityError as exc:
            if getattr(exc.orig, "sqlstate", None) != UNIQUE_VIOLATION:
                raise
            connection.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        else:
            connection.exec_driver_sql(f"RELEASE SAVEPOINT {SAVEPOINT}")
            return inserted
    return connection.execute(move, params).rowcount


def _insert_each(connection: Connection, rows: Sequence[BulkRow], params: dict[str, Any]) -> int:
    """SQLite counts the rows an ``executemany`` changed; an ignored conflict changes none."""
    batch = [{**params, "idempotency_key": key, "payload": payload} for key, payload in rows]
    return connection.execute(INSERT_ONE, batch).rowcount
