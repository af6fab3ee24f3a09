"""Continuation: work left when a budget ends is handed on as new Pub/Sub messages.

A budget-bound handler (the sweep; a file import, ``consumer.storage.continued``) that stops
with work left publishes
continuations on ``CONSUMER_CONTINUATION_TOPIC`` and acknowledges its own delivery. The load
balancer hands each continuation to whichever pod it picks, within seconds, instead of the next
tick (minutes) or a redelivery (backoff, and one more toward the dead-letter limit).

Each continuation carries a ``continuation=<uuid>`` attribute beside the route's own attributes
(``task=sweep``; a file's ``bucketId``, ``objectId``...): its idempotency key is its own
(``tick:sweep:continuation:<uuid>``, ``storage:B/O#G:OBJECT_FINALIZE:continuation:<uuid>``), so a
continuation delivered twice runs once, and a sweep's is never stale and never advances a slot.
Each is signed (``consumer.wire.signed``): outside local mode the service honours only its own
(``consumer.pipeline.admission``), so a publisher on another topic cannot start one.

The publisher is google-cloud-pubsub's ``PublisherClient``, one per process, made on first use
(after gunicorn forks); it talks to the emulator when ``PUBSUB_EMULATOR_HOST`` is set.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from consumer.observe import spans
from consumer.wire import signed

log = logging.getLogger("consumer.continuation")
ATTRIBUTE = "continuation"
_lock = threading.Lock()
_clients: dict[int, Any] = {}


PUBLISH_RESERVE_SECONDS = 1.0
"""Kept back from a budget-bound handler's time to publish its continuations."""


def publish_reserve(topic: str) -> float:
    """Seconds a handler keeps back to publish continuations on ``topic`` (none without one)."""
    return PUBLISH_RESERVE_SECONDS if topic else 0.0


def publisher() -> Any:
    """This process's ``PublisherClient`` (a forked worker makes its own: gRPC channels do not
    survive a fork)."""
    # google-cloud-pubsub takes 0.3-0.8 s to import (gRPC): only a process that publishes pays it.
    from google.cloud import pubsub_v1

    with _lock:
        client = _clients.get(os.getpid())
        if client is None:
            client = _clients[os.getpid()] = pubsub_v1.PublisherClient()
        return client


def publish(
    topic: str, attributes: Mapping[str, str], count: int, timeout: float, secret: str = ""
) -> list[str]:
    """Publish ``count`` continuations (attribute-only messages) and return their ids, waiting
    at most ``timeout`` seconds. Each is signed with ``secret`` (``CONSUMER_SIGNING_SECRETS``'
    first): the receiver honours no unsigned continuation outside local mode. A failure is
    logged, not raised: the work is not lost, it waits for the next tick as it would without
    continuations."""
    if not topic or count <= 0:
        return []
    ids = [uuid.uuid4().hex for _ in range(count)]
    with spans.publishing(topic, count) as span:
        try:
            client = publisher()
            traced = {**attributes, **spans.message_attributes()}  # the span, for the receiver
            signed_ones = [signed.sign(b"", {**traced, ATTRIBUTE: i}, secret) for i in ids]
            futures = [client.publish(topic, b"", **each) for each in signed_ones]
            for future in futures:
                future.result(timeout=max(timeout, 0.1))
        except Exception as exc:  # publishing is best effort; the backlog stays due
            log.warning("continuation not published on %s: %s", topic, exc)
            spans.failed(span, exc)
            return []
    return ids
