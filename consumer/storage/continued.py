"""A file import that ran out of budget hands the rest on as a continuation (docs/storage.md).

With ``CONSUMER_CONTINUATION_TOPIC`` set, an import that stops on its budget after committing
progress publishes ONE continuation for the object generation (``consumer.pipeline.continuation``)
and
acknowledges its own delivery, instead of answering 503: a nack is redelivered with backoff, and
each redelivery counts toward the subscription's dead-letter limit even though the inbox refunds
the attempt. The notification's inbox row ends ``done`` with ``"continuation": KEY`` in its result;
the file stays ``running`` in ``processed_files`` until the last continuation finishes it.

A continuation is a GCS-style notification (``eventType``, ``bucketId``, ``objectId``,
``objectGeneration``; no payload) plus ``continuation=<uuid>``, as the sweep's carry ``task``
plus it. Its idempotency key is its own (``storage:B/O#G:OBJECT_FINALIZE:continuation:<uuid>``):
delivered twice, it runs once; on whichever pod receives it, it resumes from the progress point
``processed_files`` holds, and one for a file already finished finds it final and does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from consumer.pipeline import continuation
from consumer.pipeline.context import HandlerContext
from consumer.storage.model import StoredObject
from consumer.storage.store import ProcessedFiles
from consumer.wire.events import StorageEvent, StorageEventType

log = logging.getLogger("consumer.storage")


class HandedOn(Exception):
    """The run stopped on its budget and a continuation carries the file on."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def summary(self, files: ProcessedFiles, obj: StoredObject) -> dict[str, Any]:
        """The handler's result: the file so far (``running``) and the continuation's key."""
        row = files.get(obj.bucket, obj.name, obj.generation)
        so_far = row.summary() if row else {"file": obj.url}
        return {**so_far, "stopped": "budget", "continuation": self.key}


def attributes(obj: StoredObject) -> dict[str, str]:
    """What a continuation carries to resume ``obj``: the notification's own attributes."""
    return {
        "eventType": StorageEventType.OBJECT_FINALIZE.value, "payloadFormat": "NONE",
        "bucketId": obj.bucket, "objectId": obj.name, "objectGeneration": str(obj.generation),
    }  # fmt: skip


def hand_on(context: HandlerContext, event: StorageEvent, obj: StoredObject) -> str:
    """Publish one continuation of ``obj``; its inbox key, or ``""`` when there is no topic or
    publishing failed (the caller then nacks, as without continuations)."""
    settings = context.settings
    published = continuation.publish(
        settings.jobs.continuation_topic,
        attributes(obj),
        1,
        context.remaining(),
        settings.admission.signing_secret,
    )
    if not published:
        return ""
    key = replace(event, continuation=published[0]).key
    log.info("file import continued", extra={"file": obj.url, "continuation": key})
    return key
