"""The inbox's values: a row's ``Status``, the ``Claim`` a delivery holds, and the rows it reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    """Retryable failure; the next delivery takes the row over."""
    DEAD = "dead"
    SKIPPED = "skipped"
    UNROUTABLE = "unroutable"


FINAL = (Status.DONE, Status.DEAD, Status.SKIPPED, Status.UNROUTABLE)


@dataclass(frozen=True)
class Claim:
    """Proof that this delivery owns the key until ``lease_until``."""

    key: str
    token: str
    attempts: int
    lease_until: datetime
    stored_in: str | None = None
    """The partition that holds the row on PostgreSQL, which the finish updates directly
    (``None`` on SQLite: one table)."""


@dataclass(frozen=True)
class InboxRow:
    key: str
    route: str
    status: Status
    attempts: int
    lease_until: datetime | None
    message_id: str
    message: Mapping[str, Any]
    result: Any
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> InboxRow:
        values = dict(row._mapping)
        values.pop("claimed_by", None)
        values.pop("placed_at", None)  # where the row is stored, not what it records
        values["status"] = Status(values["status"])
        return cls(**values)


@dataclass(frozen=True)
class Holder:
    """The row of a key a delivery could not claim (``Inbox.holder``)."""

    status: Status
    message_id: str
    format: str
    """The held message's ``consumer.wire.message.Format`` value."""
