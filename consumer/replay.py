"""Replay a stored event through the same pipeline as a live delivery."""

from __future__ import annotations

from consumer.db.engine import make_engine
from consumer.decisions import Source
from consumer.dispatch import Dispatcher
from consumer.errors import NotReplayable
from consumer.message import PushMessage
from consumer.outcomes import Outcome
from consumer.plugins import build_registry
from consumer.settings import Settings

__all__ = ["NotReplayable", "replay"]  # NotReplayable lives in consumer.errors


def replay(settings: Settings, key: str) -> Outcome:
    """Rearm the row with fresh attempts and dispatch its stored message in this process."""
    engine = make_engine(settings.database_url)
    try:
        dispatcher = Dispatcher(settings, engine, build_registry(settings))
        row = dispatcher.inbox.get(key)
        if row is None or not dispatcher.inbox.rearm(key, dispatcher.clock()):
            raise NotReplayable(f"{key!r} is missing or not dead, unroutable or failed")
        return dispatcher.dispatch(PushMessage.from_json(row.message), Source.REPLAY)
    finally:
        engine.dispose()
