"""The sweep's settings: batches, leases, retries and retention of jobs, the continuations a
sweep publishes when it runs out of budget with work left, the wake-ups an enqueue publishes,
and the jobs topic's payload limit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, setting
from consumer.config.parse import whole
from consumer.config.rules import DAY

TOPIC = re.compile(r"projects/[^/]+/topics/[^/]+")
MAX_RUN_SECONDS = 86_400
"""A Python job may run past its push for at most a day."""


def max_seconds_of(raw: str) -> dict[str, int]:
    """``CONSUMER_JOB_MAX_SECONDS``: ``KIND=SECONDS,...``; ``ValueError`` names a bad item."""
    found: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        kind, sep, seconds = item.partition("=")
        kind, seconds = kind.strip(), seconds.strip()
        if not sep or not kind or not seconds.isascii() or not seconds.isdigit():
            raise ValueError(f"{item!r} is not KIND=SECONDS")
        if not 1 <= int(seconds) <= MAX_RUN_SECONDS or kind in found:
            raise ValueError(f"{item!r}: SECONDS must be 1..{MAX_RUN_SECONDS}, each kind once")
        found[kind] = int(seconds)
    return found


@dataclass(frozen=True, repr=False)
class JobSettings(Section):
    """``CONSUMER_JOB_*``, ``CONSUMER_SWEEP_BATCH_SIZE``, ``CONSUMER_CONTINUATION_*`` and
    ``CONSUMER_WAKE_*``."""

    prefix: ClassVar[str] = "JOB_"
    # SQLite binds at most 32766 parameters.
    sweep_batch_size: int = setting(100, convert=whole, within=(1, 10_000), env="SWEEP_BATCH_SIZE")
    """Jobs the sweep claims per statement (its results are recorded as it goes, not per batch)."""
    sweep_flush_ms: int = setting(5, convert=whole, within=(0, 10_000), env="SWEEP_FLUSH_MS")
    """Results of fast jobs are recorded together at least this often; a job that takes longer
    than a commit is recorded before the next starts. A sweeper killed mid-batch re-runs at most
    the job it was running plus those it finished in the last window (only the job it was
    running, for a kind declared ``record_each``, like ``email``)."""
    lease_seconds: int = setting(3, convert=whole, within=(1, 3600))
    """Lease on a claimed job, renewed by the live sweeper every third of it: a killed sweeper's
    jobs are taken over after about this long."""
    held_lease_seconds: int = setting(30, convert=whole, within=(3, 3600))
    """Lease of a job whose HTTP target answered 202 Accepted: the target must report (``POST
    /jobs/{id}/heartbeat`` or ``/complete``) within it, each heartbeat extending it this long
    again; past it, the job is retried under a new claim (docs/long-running-jobs.md)."""
    max_seconds: str = setting("", env="JOB_MAX_SECONDS")
    """Python job kinds that may run past the push that started them, each with its maximum
    (``report=600,export=3600``, 1..86400 s): such a job runs in a thread of its own, holding
    and renewing its lease until it ends or its maximum passes (then its lease lapses and it is
    retried); ``context.remaining()`` counts down to that maximum (docs/long-running-jobs.md)."""
    max_attempts: int = setting(10, convert=whole, within=(1, 1000))
    """Attempts of a job enqueued without its own ``max_attempts`` before it is ``dead``."""
    retry_base_seconds: int = setting(10, convert=whole, within=(0, 30 * DAY))
    """First retry delay of a failed job; doubles per attempt, with jitter, up to the max."""
    retry_max_seconds: int = setting(3600, convert=whole, within=(0, 30 * DAY))
    retention_seconds: int = setting(7 * DAY, convert=whole, within=(60, 3650 * DAY))
    """``cleanup`` purges finished jobs (freeing their idempotency keys) after this."""
    continuation_topic: str = setting("", env="CONTINUATION_TOPIC")
    """Pub/Sub topic (``projects/P/topics/T``, pushed to this service) on which a sweep or a file
    import that ran out of budget with work left publishes a continuation; empty: the next tick
    (or, for an import, Pub/Sub's redelivery) carries on."""
    continuation_fanout: int = setting(4, convert=whole, within=(1, 100), env="CONTINUATION_FANOUT")
    """Most continuations one tick's sweep publishes, so several pods drain a backlog."""
    max_payload_bytes: int = setting(64 * 1024, convert=whole, within=(64, 1 << 20))
    """Largest payload of a job from a producer: the jobs topic (a larger one is recorded
    ``dead``) and the SQL function ``consumer_enqueue`` (a larger one is an SQL error)."""
    wake_topic: str = setting("", env="WAKE_TOPIC")
    """Pub/Sub topic (``projects/P/topics/T``, pushed to this service) on which a committed
    enqueue publishes a wake-up (at most one per process per ``CONSUMER_WAKE_WINDOW_MS``): its
    push sweeps the due jobs now instead of at the next tick. Empty: no wake-up."""
    wake_url: str = setting("", env="WAKE_URL")
    """Local mode only, without a wake topic: the local server's ``/push``, to which an enqueue
    POSTs its wake-up (``consumer serve --local`` sets it for its workers)."""
    wake_window_ms: int = setting(50, convert=whole, within=(1, 10_000), env="WAKE_WINDOW_MS")
    """Wake-ups of one process are coalesced over this window (the last one is always sent)."""

    def checks(self) -> list[Rule]:
        topic = self.continuation_topic
        try:
            max_seconds_of(self.max_seconds)
            long_kinds = ""
        except ValueError as exc:
            long_kinds = str(exc)
        return [
            (not long_kinds, f"CONSUMER_JOB_MAX_SECONDS: {long_kinds}"),
            (
                self.retry_base_seconds <= self.retry_max_seconds,
                "CONSUMER_JOB_RETRY_BASE_SECONDS must be at most CONSUMER_JOB_RETRY_MAX_SECONDS",
            ),
            (
                not topic or TOPIC.fullmatch(topic) is not None,
                "CONSUMER_CONTINUATION_TOPIC must be projects/PROJECT/topics/TOPIC",
            ),
            (
                not self.wake_topic or TOPIC.fullmatch(self.wake_topic) is not None,
                "CONSUMER_WAKE_TOPIC must be projects/PROJECT/topics/TOPIC",
            ),
            (
                not self.wake_url or self.wake_url.startswith(("http://", "https://")),
                "CONSUMER_WAKE_URL must be an http(s) URL",
            ),
        ]
