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
by one; ``inbox_purged`` counts the rows the dropped partitions held. Jobs go in chunks on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from consumer.inbox.partitions import make_ahead, partitioned, retire
from consumer.inbox.store import Inbox
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
    jobs_purged, jobs_more = _in_chunks(
        context, lambda limit: JobStore(engine).purge(jobs_before, limit=limit)
    )
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
        "task": event.task, **inbox, "jobs_purged": jobs_purged,
        "more": left, "continuations": len(published), "jobs_cancelled": cancelled,
    }  # fmt: skip


def _by_partitions(
    context: HandlerContext, before: datetime, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The partitioned inbox's retention: the weeks ahead made, the weeks past ``before``
    dropped; ``(what it did, stopped early)``."""
    made = make_ahead(context.engine, now)
    reserve = _reserve(context)

    def stop() -> bool:
        context.heartbeat()
        return context.remaining() <= reserve

    retired = retire(context.engine, before, now, stop)
    return {
        "inbox_purged": retired.rows,
        "inbox_partitions_made": made.made,
        "inbox_partitions_dropped": retired.dropped,
        "inbox_rows_carried": retired.carried,
        "inbox_partitions_skipped": {**made.skipped, **retired.skipped},
    }, retired.more


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
