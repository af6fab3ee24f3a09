"""Replay a stored event through the same pipeline as a live delivery."""

from __future__ import annotations

from consumer.errors import NotReplayable
from consumer.pipeline.decision_log import Source
from consumer.pipeline.rerun import Rerun, stored_event
from consumer.service import Service
from consumer.wire.outcomes import Outcome


def replay(service: Service, key: str) -> Outcome:
    """Rearm the row with fresh attempts and run its stored message in this process, as the
    event it still is: a tick under its own slot, whatever slots completed since (``Rerun``).
    A message that now classifies differently is not replayed, and its row is left as it was:
    rearming it would strand it, and the run would record under another key."""
    dispatcher = Rerun(service.settings, service.engine, service.registry)
    row = dispatcher.inbox.get(key)
    if row is None:
        raise NotReplayable(f"{key!r} is missing")
    event = stored_event(dispatcher, row)
    if not dispatcher.inbox.rearm(key, dispatcher.clock()):
        raise NotReplayable(f"{key!r} is not dead, unroutable or failed")
    return dispatcher.handle(event, Source.REPLAY)
