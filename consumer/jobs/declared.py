"""``job_kinds``: each serving process declares the kinds it runs, so a producer that enqueues
in SQL (``consumer_enqueue``, migration ``0010_sql_enqueue``) meets the same rules as one that
publishes on the jobs topic: an unknown kind is refused, and the payload is filtered to the
fields the kind lets producers set (``consumer.jobs.fields``), within the payload limit.

Rows are only added or refreshed, never removed: during a rolling deploy old and new pods run
side by side, and a job of a kind only the old pods know still has a sweeper until they go.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from consumer.config.flow import NO_LIMIT, JobLimit
from consumer.config.settings import Settings
from consumer.db.dialect import upsert
from consumer.jobs.fields import producer_fields
from consumer.jobs.schema import job_kinds
from consumer.pipeline.extensions import Functions
from consumer.wire.timeutil import utcnow


def declare(
    connection: Connection,
    kinds: Functions,
    settings: Settings,
    declared: Mapping[str, JobLimit] | None = None,
) -> int:
    """Write (or refresh) one row per kind of ``kinds``; how many. Sorted, so two processes
    starting together lock the rows in the same order. ``declared``: the kinds' declared limits
    (``registry.job_limits``), for the payload field each groups by."""
    now, limit = utcnow(), settings.jobs.max_payload_bytes
    for name in kinds.names():
        fields = producer_fields(kinds, name)
        values = {
            "kind": name, "producer_fields": None if fields is None else sorted(fields),
            "max_payload_bytes": limit, "updated_at": now,
            "group_field": (declared or {}).get(name, NO_LIMIT).group_by,
        }  # fmt: skip
        dialect = connection.dialect.name
        connection.execute(upsert(job_kinds, dialect, values, [job_kinds.c.kind], _refreshed))
    return len(kinds.names())


def _refreshed(excluded: Any) -> dict[str, Any]:
    refreshed = ("producer_fields", "max_payload_bytes", "updated_at", "group_field")
    return {name: excluded[name] for name in refreshed}
