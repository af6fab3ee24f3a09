"""The options of ``import-jobs``, from the matching rule's ``options`` object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, Protocol

from consumer.errors import SettingsError

FORMATS = ("auto", "csv", "jsonl")
JSONL_MEDIA_TYPES = {
    "application/jsonl", "application/x-jsonlines", "application/jsonlines",
    "application/x-ndjson", "application/ndjson",
}  # fmt: skip
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
EMAIL_ADDRESS_FIELDS = ("to", "cc", "bcc", "reply_to", "from")
LIMITS = {"batch_rows": (1, 10_000), "max_errors": (0, 10_000), "max_row_bytes": (64, 1 << 20)}
INT32 = (-(1 << 31), (1 << 31) - 1)
"""``jobs.priority`` and ``jobs.max_attempts`` are 32-bit columns."""


class Named(Protocol):
    """What ``format_for`` reads of a stored object (``consumer.storage.model.StoredObject``)."""

    @property
    def name(self) -> str: ...

    @property
    def content_type(self) -> str: ...


@dataclass(frozen=True)
class ImportOptions:
    kind: str = "email"
    """The job kind every row becomes."""
    format: str = "auto"
    """``csv``, ``jsonl``, or ``auto`` (JSON Lines by content type or ``.jsonl``/``.ndjson``)."""
    required: tuple[str, ...] | None = None
    """Fields that must be present and non-empty; default ``to`` for ``email``, else none."""
    emails: tuple[str, ...] | None = None
    """Fields that, when present, must hold email addresses; default the address fields of
    ``email`` (``to``, ``cc``, ``bcc``, ``reply_to``, ``from``), else none."""
    priority: int = 0
    max_attempts: int | None = None
    batch_rows: int = 5000
    """Rows per transaction (each commits its jobs with the progress they represent)."""
    max_errors: int = 100
    """Rejected rows kept, with line number and reason, in ``processed_files.errors``."""
    max_row_bytes: int = 64 * 1024
    """A row whose JSON payload is larger is rejected."""
    fields: tuple[str, ...] | None = None
    """The row's fields a job keeps; default those its kind lets producers set (for ``email``:
    ``to``, ``subject``, ``text``, ``html``). Other columns are dropped, never stored."""
    set_fields: Mapping[str, Any] | None = None
    """Fields every job of the rule gets, over the row's: for ``email`` the sender and the
    other recipients (``from``, ``cc``, ``bcc``, ``reply_to``, ``headers``), which a row cannot
    set."""

    @cached_property
    def required_fields(self) -> tuple[str, ...]:
        if self.required is not None:
            return self.required
        return ("to",) if self.kind == "email" else ()

    @cached_property
    def email_fields(self) -> tuple[str, ...]:
        if self.emails is not None:
            return self.emails
        return EMAIL_ADDRESS_FIELDS if self.kind == "email" else ()

    def format_for(self, obj: Named) -> str:
        if self.format != "auto":
            return self.format
        media_type = obj.content_type.split(";", 1)[0].strip().lower()
        if media_type in JSONL_MEDIA_TYPES or obj.name.lower().endswith(JSONL_SUFFIXES):
            return "jsonl"
        return "csv"

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> ImportOptions:
        """Raise ``SettingsError`` naming every problem (a retry after the fix succeeds)."""
        known = {spec.name for spec in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise SettingsError(f"import-jobs: unknown options {unknown}")
        values = dict(options)
        for name in ("required", "emails", "fields"):
            if name in values:
                values[name] = _names(values[name], name)
        parsed = cls(**values)
        parsed.check()
        return parsed

    def check(self) -> None:
        problems = []
        if not isinstance(self.kind, str) or not 0 < len(self.kind) <= 100:
            problems.append("'kind' must be a job kind name")
        if self.format not in FORMATS:
            problems.append(f"'format' must be one of {', '.join(FORMATS)}")
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if not _is_int(value) or not low <= value <= high:
                problems.append(f"'{name}' must be a whole number in {low}..{high}")
        low, high = INT32
        if not (_is_int(self.priority) and low <= self.priority <= high):
            problems.append(f"'priority' must be a whole number in {low}..{high}")
        if self.set_fields is not None and not isinstance(self.set_fields, Mapping):
            problems.append("'set_fields' must be an object of field names to values")
        if self.max_attempts is not None and not (
            _is_int(self.max_attempts) and 1 <= self.max_attempts <= high
        ):
            problems.append(f"'max_attempts' must be a whole number in 1..{high}")
        if problems:
            raise SettingsError("import-jobs: " + "; ".join(problems))


def _names(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SettingsError(f"import-jobs: '{name}' must be a list of field names")
    return tuple(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
