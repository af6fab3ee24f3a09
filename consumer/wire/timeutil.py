"""UTC time helpers: one clock for the whole service, injectable in tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_rfc3339(text: str) -> datetime:
    """Parse Pub/Sub's RFC 3339 timestamps (``Z`` suffix, up to nanoseconds) as aware UTC."""
    if not isinstance(text, str) or not text:
        raise ValueError("timestamp must be a non-empty string")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    value = _trim_fraction(value)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return parsed.astimezone(UTC)


def _trim_fraction(value: str) -> str:
    """Python parses at most microseconds; Google sends up to nanoseconds."""
    head, dot, rest = value.partition(".")
    if not dot:
        return value
    digits = ""
    while rest and rest[0].isdigit():
        digits, rest = digits + rest[0], rest[1:]
    if not digits:
        raise ValueError(f"timestamp {value!r} has an empty fraction")
    return f"{head}.{digits[:6].ljust(6, '0')}{rest}"


def floor_to_period(moment: datetime, period_seconds: int) -> datetime:
    """The start of the schedule slot that ``moment`` falls in (slots aligned to the epoch)."""
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % period_seconds, UTC)
