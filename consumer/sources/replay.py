"""Replay a stored event through the same pipeline as a live delivery."""

from __future__ import annotations

from consumer.errors import InvalidEvent, NotReplayable
from consumer.pipeline.decisions import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.wire.events import Event
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Outcome


def replay(service: Service, key: str) -> Outcome:
    """Rearm the row with fresh attempts and run its stored message in this process, as the
    event it still is. A message that now classifies differently (a tick task's schedule changed,
    so its slot and key did; a lowered ``CONSUMER_MAX_JSON_NODES``) is not replayed, and its row
    is left as it was: rearming it would strand it, and the run would record under another key."""
    dispatcher = Dispatcher(service.settings, service.engine, service.registry)
    row = dispatcher.inbox.get(key)
    if row is None:
        raise NotReplayable(f"{key!r} is missing")
    event = _event_of(dispatcher, PushMessage.from_json(row.message), key)
    if not dispatcher.inbox.rearm(key, dispatcher.clock()):
        raise NotReplayable(f"{key!r} is not dead, unroutable or failed")
    return dispatcher.handle(event, Source.REPLAY)


def _event_of(dispatcher: Dispatcher, message: PushMessage, key: str) -> Event:
    try:
        event = dispatcher.classify(message)
    except InvalidEvent as exc:
        raise NotReplayable(f"{key!r} is no longer a valid event: {exc.message}") from None
    if event.key != key:
        raise NotReplayable(
            f"{key!r} would now run as {event.key!r} (has its schedule changed?); not replayed"
        )
    return event
