"""The re-drive: no work waits on a redelivery.

A ``running`` inbox row whose lease ran out long ago (``CONSUMER_INBOX_REDRIVE_AFTER_SECONDS``,
default two ack deadlines) and that no redelivery took over is a delivery that died with its
message gone: acknowledged by mistake, or never redelivered (a deploy hook, an HTTP tick, a CLI
run, a message Pub/Sub dropped). The sweep (``consumer.jobs.tick``) runs such rows again from the
message each row keeps, through the pipeline (``consumer.pipeline.rerun``), so its claim guards
the run as it guards a redelivery: of two pods re-driving one row at once, one takes it over and
runs it, the other finds it held. A tick runs under its slot even if newer slots completed since.
Each run claims an attempt, so a message that kills its worker every time ends ``dead``.

Nothing polls: the sweep's tick brings the re-drive, and each run is bounded by the sweep's
budget. A re-driven delivery gets a handler budget of its own, so rows are started only in the
first half of the safety margin of a sweep that has its whole budget: a row started then ends
before the sweep's own ack deadline. They run on a thread of their own (a delivery's connection
is its thread's, and the sweep's thread holds its own); the sweep waits for that thread until its
deadline at most, then goes on with its jobs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import ConsumerError, NotReplayable, Unavailable
from consumer.inbox.model import Status
from consumer.observe import metrics
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.decision_log import Source
from consumer.pipeline.registry import Registry
from consumer.pipeline.rerun import Rerun, stored_event
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.redrive")
BATCH = 100
"""Keys read at once: a run that gets through a full batch reads again, while its window is open."""
NOT_RUN = frozenset({Kind.DUPLICATE, Kind.IN_PROGRESS, Kind.REJECTED, Kind.UNAVAILABLE})
"""Outcomes of a re-drive that claimed nothing: another delivery holds or finished the row."""
_local = threading.local()


def redrive_in(context: HandlerContext, registry: Registry) -> int:
    """Re-drive the lapsed rows a handler's delivery has room for (the sweep's); how many ran.
    None in a run that is itself re-driven (a sweep's row): the outer run goes on with them.
    The first keys are read here, so a sweep with nothing to re-drive starts no thread."""
    settings = context.settings
    start_by = context.deadline - settings.handler_budget_seconds
    start_by += settings.inbox.safety_margin_seconds / 2
    if getattr(_local, "active", False) or time.monotonic() >= start_by:
        return 0
    redrive = Redrive(settings, context.engine, registry, context.clock, start_by)
    try:
        keys = redrive.lapsed()
    except Unavailable as exc:  # the sweep's own work meets the fault, or not: its call
        log.warning("the re-drive could not read the inbox: %s", exc.message)
        return 0
    if not keys:
        return 0
    thread = threading.Thread(target=redrive.run, args=(keys,), name="inbox-redrive", daemon=True)
    thread.start()
    thread.join(max(context.remaining(), 0.0))
    return redrive.ran


class Redrive:
    """One run: lapsed rows, longest lapsed first, each run again while rows may still start."""

    def __init__(
        self, settings: Settings, engine: Engine, registry: Registry, clock: Clock, start_by: float
    ) -> None:
        self.dispatcher = Rerun(settings, engine, registry, clock)
        self.start_by = start_by
        self.ran = 0

    def lapsed(self) -> Sequence[str]:
        """A batch of keys of rows lapsed longer than the setting, longest lapsed first."""
        after = timedelta(seconds=self.dispatcher.settings.inbox.redrive_after)
        return self.dispatcher.inbox.lapsed(self.dispatcher.clock() - after, BATCH)

    def run(self, keys: Sequence[str] | None = None) -> None:
        """On the run's own thread, from ``keys`` (default: read them) batch after batch while
        the window is open; a fault ends the run (the next sweep tries again)."""
        _local.active = True
        try:
            keys = self.lapsed() if keys is None else keys
            while self._through(keys) and len(keys) == BATCH:
                keys = self.lapsed()
        except ConsumerError as exc:
            log.warning("the re-drive stopped: %s", exc.message)
        except Exception:
            log.exception("the re-drive failed")

    def _through(self, keys: Sequence[str]) -> bool:
        """Each key in turn; ``False`` if the window shut first."""
        for key in keys:
            if time.monotonic() >= self.start_by:
                return False
            self.ran += self.one(key)
        return True

    def one(self, key: str) -> bool:
        """Run ``key``'s stored message again; whether this run claimed it (and counted it).
        A message that is no longer an event under its key can never run: recorded ``dead``."""
        inbox = self.dispatcher.inbox
        row = inbox.get(key)
        if row is None or row.status is not Status.RUNNING:
            return False
        try:
            event = stored_event(self.dispatcher, row)
        except NotReplayable as exc:
            ran = inbox.bury(key, self.dispatcher.clock(), f"re-drive: {exc.message}")
            outcome = Kind.DEAD.value if ran else "taken"
        else:
            kind = self.dispatcher.handle(event, Source.REDRIVE).kind
            ran, outcome = kind not in NOT_RUN, kind.value
        if ran:
            metrics.redriven(row.route)
            log.warning("re-driven", extra={"key": key, "route": row.route, "outcome": outcome})
        return ran
