"""A run owed to a stored message: an operator's replay (``consumer.sources.replay``) and the
service's re-drive of a row nobody redelivered (``consumer.pipeline.redrive``).

Both take the message the inbox row keeps and hand its event to the pipeline, under the row's own
key, so the inbox claim guards it as it guards a redelivery. Their dispatcher does not coalesce
ticks: the slot was claimed while it was current and never ran to its end, so newer slots that
completed since do not make it stale (a backlog's ticks, which nothing ever claimed, still are).
"""

from __future__ import annotations

from consumer.errors import InvalidEvent, NotReplayable
from consumer.inbox.model import InboxRow
from consumer.pipeline.dispatch import Dispatcher
from consumer.wire.events import Event
from consumer.wire.message import PushMessage


class Rerun(Dispatcher):
    """The pipeline for a stored message: every rule of a delivery, with the route policies
    built for a rerun (a tick's stale-slot rule does not apply)."""

    rerun = True


def stored_event(dispatcher: Dispatcher, row: InboxRow) -> Event:
    """The event ``row``'s message still is, under its key; ``NotReplayable`` if it no longer
    classifies (a lowered ``CONSUMER_MAX_JSON_NODES``) or now runs under another key (a tick
    task's schedule changed, so its slot and key did): running it would record elsewhere."""
    try:
        message = PushMessage.from_json(row.message)
    except (KeyError, TypeError, ValueError) as exc:
        raise NotReplayable(f"{row.key!r} has an unreadable stored message: {exc!r}") from None
    try:
        event = dispatcher.classify(message)
    except InvalidEvent as exc:
        raise NotReplayable(f"{row.key!r} is no longer a valid event: {exc.message}") from None
    if event.key != row.key:
        raise NotReplayable(
            f"{row.key!r} would now run as {event.key!r} (has its schedule changed?); not replayed"
        )
    return event
