"""The jobs topic: a Pub/Sub message with a ``job_kind`` attribute enqueues one job.

Attributes: ``job_kind`` (required), ``job_key`` (the idempotency key; default the subscription
and messageId), ``job_run_at`` (RFC 3339), ``job_priority``, ``job_max_attempts``,
``job_lock_key`` (jobs sharing it run one at a time, in enqueue order), ``job_group`` (jobs
of different groups take turns; a kind may cap or rate each group); the data is
the JSON object payload (empty: ``{}``), filtered to the fields the kind lets producers set
(``consumer.jobs.fields``). The same key published again is the same job.

A producer's key and lock key live in the producers' namespace (``topic:KEY``,
``consumer.wire.events.PRODUCER_NAMESPACE``): no message can take a key trusted code enqueues
under, or queue behind (or hold up) a lock key trusted code uses. A run-at further ahead than
``CONSUMER_PRODUCER_MAX_DELAY_SECONDS`` is a bad job, so no producer parks a lock key's queue
for ever.

Exactly-once by one commit: the handler is declared ``local_effects``, so the inbox claim, the
enqueue and the outcome are one transaction (``context.connection``); a crash or a cut anywhere
in it leaves none of them, and the redelivery enqueues the job. The job's idempotency key still
keeps a key published twice (two messages, two inbox keys) one job.

A bad job (unknown kind, bad run-at, oversized or non-object payload) is ``Permanent``: recorded
``dead`` with the full message and acknowledged, so nothing is lost and a replay
(``consumer replay KEY``) enqueues it once the kind exists or the cause is mended.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from consumer.config.flow import NO_LIMIT
from consumer.errors import Permanent
from consumer.jobs import wake
from consumer.jobs.fields import producer_fields, restricted
from consumer.jobs.model import (
    INT32_MAX,
    INT32_MIN,
    Debounce,
    EnqueueResult,
    InvalidJob,
    NewJob,
    group_from,
)
from consumer.jobs.store import JobStore, enqueue
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import PRODUCER_NAMESPACE, JobEvent
from consumer.wire.json_limits import strict_loads, too_many_values
from consumer.wire.timeutil import parse_rfc3339


def register(registry: Registry) -> None:
    """The built-in handler of the ``job`` route."""

    def enqueue_job(context: HandlerContext, event: JobEvent) -> dict[str, Any]:
        known = registry.job_kinds.names()
        if event.kind not in known:
            raise Permanent(
                f"unknown job kind {event.kind!r} (known: {', '.join(known) or 'none'}); "
                "replay this message once a plugin provides the kind"
            )
        payload, ignored = restricted(
            payload_of(event, context), producer_fields(registry.job_kinds, event.kind)
        )
        declared = registry.job_limits.get(event.kind, NO_LIMIT)
        job = new_job(event, payload, group_from(payload, declared.group_by))
        job = debounced(job, event, declared.debounce)
        _check_delay(job, context)
        result = enqueue_new(context, job, known)
        return {"kind": event.kind, "job": result.job_id, "inserted": result.inserted,
                "job_key": event.job_key, "ignored_fields": ignored}  # fmt: skip

    registry.route("job", enqueue_job, local_effects=True)


def enqueue_new(context: HandlerContext, job: NewJob, known: tuple[str, ...]) -> EnqueueResult:
    """In the delivery's transaction (a sweeper is woken once it commits); in one of its own
    when the handler is run without one."""
    connection = context.connection
    if connection is None:
        return enqueue(context.engine, job.kind, job.payload, key=job.key, run_at=job.run_at,
                       priority=job.priority, max_attempts=job.max_attempts, kinds=known,
                       lock_key=job.lock_key, group=job.group)  # fmt: skip
    result = JobStore(context.engine).enqueue(job, kinds=known, connection=connection)
    if result.inserted:
        wake.on_commit(connection)
    return result


def payload_of(event: JobEvent, context: HandlerContext) -> dict[str, Any]:
    """The message's data as a JSON object, within the jobs' and the inbox's limits."""
    data, limit = event.message.data, context.settings.jobs.max_payload_bytes
    if not data.strip():
        return {}
    if len(data) > limit:
        raise Permanent(f"the job payload is {len(data)} bytes, over the {limit}-byte limit")
    if too_many_values(data, context.settings.inbox.max_json_nodes):
        raise Permanent("the job payload holds too many JSON values")
    try:
        payload = strict_loads(data)  # PostgreSQL refuses NaN: never a retry loop for it
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Permanent(f"the job payload is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise Permanent(f"the job payload must be a JSON object, not {type(payload).__name__}")
    return payload


def new_job(event: JobEvent, payload: dict[str, Any], derived: str | None = None) -> NewJob:
    """The job a message asks for; its group is the ``job_group`` attribute, else ``derived``
    (from the payload field its kind groups by)."""
    attributes = event.attributes
    try:
        return NewJob(
            event.kind, payload, event.job_key, _run_at(attributes.get("run_at")),
            _whole(attributes.get("priority"), "job_priority", INT32_MIN) or 0,
            _whole(attributes.get("max_attempts"), "job_max_attempts", 1),
            event.lock_key, attributes.get("group", derived),
        )  # fmt: skip
    except InvalidJob as exc:
        raise Permanent(str(exc)) from None


def debounced(job: NewJob, event: JobEvent, windows: tuple[float, float] | None) -> NewJob:
    """With a ``job_debounce_key`` attribute, the job debounced by its kind's windows (in the
    producers' namespace, as its keys)."""
    key = event.attributes.get("debounce_key")
    if key is None:
        return job
    if windows is None:
        raise Permanent(f"job kind {event.kind!r} declares no debounce: drop 'job_debounce_key'")
    try:
        return replace(job, key=None, debounce=Debounce(PRODUCER_NAMESPACE + key, *windows))
    except InvalidJob as exc:
        raise Permanent(str(exc)) from None


def _check_delay(job: NewJob, context: HandlerContext) -> None:
    """A producer may schedule at most ``CONSUMER_PRODUCER_MAX_DELAY_SECONDS`` ahead."""
    limit = context.settings.admission.producer_max_delay_seconds
    if job.run_at is not None and job.run_at > context.clock() + timedelta(seconds=limit):
        raise Permanent(
            f"'job_run_at' {job.run_at.isoformat()} is more than {limit} s ahead "
            "(CONSUMER_PRODUCER_MAX_DELAY_SECONDS); replay this message once it is within reach"
        )


def _run_at(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise Permanent(f"'job_run_at' is not an RFC 3339 time with a zone: {exc}") from None


def _whole(text: str | None, label: str, low: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise Permanent(f"'{label}' must be a whole number, not {text[:40]!r}") from None
    if not low <= value <= INT32_MAX:
        raise Permanent(f"'{label}' must be in {low}..{INT32_MAX}")
    return value
