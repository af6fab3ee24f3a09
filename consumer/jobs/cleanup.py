"""Tick task ``cleanup``: purge finished inbox rows and jobs past their retention, and inbox rows
left ``running`` by a delivery that died and never came back (lease expired over the retention).

Rows go in chunks of ``CHUNK_ROWS``, one transaction each, so no single DELETE outlasts the ack
deadline (rolled back, then retried the next day forever) or holds SQLite's write lock for long.
After each chunk the task rests ``PAUSE_RATIO`` times as long as the chunk took, so the pushes
beside it keep the WAL's disk: chunks back to back wrote WAL as fast as the disk took it, and
pushes waited behind it (bench/growth_bench.py). When the budget runs low the task stops and
reports ``more: true``, and with ``CONSUMER_CONTINUATION_TOPIC`` set it publishes one
continuation (``consumer.pipeline.continuation``), whose cleanup goes on at once on whichever pod
receives it: a chain until the rows past retention are gone. Without it the next day's tick goes
on, and a day's tick covers only what its one budget can delete (docs/capacity.md).

On PostgreSQL the inbox is partitioned by week: there the task makes the weeks ahead and drops
the weeks whose rows are all past retention (``consumer.inbox.partitions``), no row deleted one
by one; ``inbox_purged`` counts the rows the dropped partitions held. There the jobs table is
partitioned by epoch: the task makes the next epoch's partition, switches epochs when the current
one is as old as an epoch lasts, analyzes a young epoch, and drops the epochs whose jobs all
finished before the cutoff (``consumer.jobs.epoch_retire``); only an epoch that ended before the
cutoff and that unfinished jobs hold has its finished jobs deleted in chunks. On SQLite the jobs
go in chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from consumer.inbox.partitions import make_ahead, partitioned
from consumer.inbox.partitions import retire as retire_weeks
from consumer.inbox.store import Inbox
from consumer.jobs import epochs
from consumer.jobs.epoch_retire import retire
from consumer.jobs.store import JobStore
from consumer.pipeline import continuation
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import TickEvent

DAY = 24 * 3600
CHUNK_ROWS = 1000
PAUSE_RATIO = 9.0
"""Rest this many times a chunk's duration after it: the purge takes a tenth of a core and of the
WAL's disk at most. Measured beside 200 pushes/s on 2 million rows (bench/growth_bench.py), chunks
of 1,000 with 9x rests kept the pushes' p99 at 1.5x of before, chunks of 5,000 with 1x rests at
3.2x; the purge still deletes about 13,000 rows/s there, a day of 1,000 pushes/s in two hours."""
RESERVE_SECONDS = 5.0
"""Stop purging when less than this is left of the budget (a chunk takes well under it)."""


def cleanup(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    settings, engine, now = context.settings, context.engine, context.clock()
    inbox_before = now - timedelta(seconds=settings.inbox.retention_seconds)
    jobs_before = now - timedelta(seconds=settings.jobs.retention_seconds)
    if partitioned(engine):
        inbox, more = _by_partitions(context, inbox_before, now)
    else:
        inbox_purged, more = _in_chunks(
            context, lambda limit: Inbox(engine).purge(inbox_before, limit=limit)
        )
        inbox = {"inbox_purged": inbox_purged}
    if epochs.by_epoch(engine):
        jobs, jobs_more = _by_epochs(context, jobs_before, now)
    else:
        jobs_purged, jobs_more = _in_chunks(
            context, lambda limit: JobStore(engine).purge(jobs_before, limit=limit)
        )
        jobs = {"jobs_purged": jobs_purged}
    left = more or jobs_more
    cancelled = JobStore(engine).end_lapsed_cancels(now)  # their holders died after the request
    published = continuation.publish(
        settings.jobs.continuation_topic,
        {"task": event.task},
        int(left),
        context.remaining(),
        settings.admission.signing_secret,
    )
    return {
        "task": event.task, **inbox, **jobs,
        "more": left, "continuations": len(published), "jobs_cancelled": cancelled,
    }  # fmt: skip


def _by_partitions(
    context: HandlerContext, before: datetime, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The partitioned inbox's retention: the weeks ahead made, the weeks past ``before``
    dropped; ``(what it did, stopped early)``."""
    made = make_ahead(context.engine, now)
    retired = retire_weeks(context.engine, before, now, _stop(context))
    return {
        "inbox_purged": retired.rows,
        "inbox_partitions_made": made.made,
        "inbox_partitions_dropped": retired.dropped,
        "inbox_rows_carried": retired.carried,
        "inbox_partitions_skipped": {**made.skipped, **retired.skipped},
    }, retired.more


def _by_epochs(
    context: HandlerContext, before: datetime, now: datetime
) -> tuple[dict[str, Any], bool]:
    """PostgreSQL's jobs by epoch: the epochs turned (``_turn``), those past ``before`` dropped,
    the stuck ones chunk-deleted; ``(what it did, stopped early)``."""
    engine = context.engine
    turned, skipped = _turn(engine, now, timedelta(seconds=context.settings.jobs.retention_seconds))
    retired = retire(engine, before, _stop(context))
    chunked, more, stuck = 0, retired.more, retired.stuck
    if stuck and not more:
        chunked, more = _in_chunks(
            context, lambda limit: JobStore(engine).purge(before, limit=limit, epochs=stuck)
        )
    return {
        "jobs_purged": retired.rows + chunked, **turned,
        "jobs_partitions_dropped": retired.dropped,
        "jobs_partitions_skipped": {**skipped, **retired.skipped},
        "jobs_rows_chunked": chunked,
    }, more  # fmt: skip


def _turn(
    engine: Engine, now: datetime, retention: timedelta
) -> tuple[dict[str, Any], dict[str, str]]:
    """The next epoch's partition made, the switch when due, else the young epoch analyzed
    (``epochs.analyze_young`` says why not at the switch); ``(what it did, what it could not
    do and why)``."""
    made = epochs.make_next(engine)
    switched = epochs.switch(engine, now, epochs.epoch_length(retention))
    analyzed = epochs.analyze_young(engine) if switched is None else None
    with engine.connect() as connection:
        current = epochs.current(connection).number
    skipped = {}
    if made is None:
        skipped[epochs.partition_name(current + 1)] = epochs.LOCK_NOT_GRANTED
    return {
        "jobs_epoch": current,
        "jobs_epoch_switched": switched is not None,
        "jobs_epoch_analyzed": analyzed,
    }, skipped


def _stop(context: HandlerContext) -> Callable[[], bool]:
    """Whether the budget is low (asked between partitions); a heartbeat each time."""
    reserve = _reserve(context)

    def stop() -> bool:
        context.heartbeat()
        return context.remaining() <= reserve

    return stop


def _reserve(context: HandlerContext) -> float:
    return min(RESERVE_SECONDS, context.settings.handler_budget_seconds / 2)


def _in_chunks(context: HandlerContext, purge: Callable[[int], int]) -> tuple[int, bool]:
    """Purge chunk by chunk (at least one) until one comes back short or the budget is low;
    ``(purged, stopped early)``."""
    reserve = _reserve(context)
    purged = 0
    while True:
        started = time.monotonic()
        deleted = purge(CHUNK_ROWS)
        purged += deleted
        if deleted < CHUNK_ROWS:
            return purged, False
        if context.remaining() <= reserve:
            return purged, True
        context.heartbeat()
        took = time.monotonic() - started
        time.sleep(min(took * PAUSE_RATIO, max(context.remaining() - reserve, 0.0)))


def register(registry: Registry) -> None:
    registry.tick("cleanup", period_seconds=DAY)(cleanup)
