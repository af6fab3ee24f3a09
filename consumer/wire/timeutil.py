"""UTC time helpers: one clock for the whole service, injectable in tests, and the parsers of
every time a sender gives us (RFC 3339 and HTTP dates).

A sender's time is refused (``ValueError``, which every parse site turns into a 400 or a
permanent fault) unless it lies in ``EARLIEST``..``LATEST``: the service counts slots from the
Unix epoch, and arithmetic on a time near datetime's ends (an offset, a period, a lease, a cron
search) raises ``OverflowError``, which no caller expects.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

Clock = Callable[[], datetime]

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""Exclusive: no event of ours is dated this late, and a year or more is left before datetime's
end for any arithmetic."""


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
        raise ValueError(f"timestamp {text[:100]!r} has no time zone")
    return in_range(parsed, text)


def parse_http_date(text: str) -> datetime:
    """An HTTP date (``Wed, 21 Oct 2015 07:28:00 GMT``) as aware UTC; one without a zone is
    read as UTC, which an HTTP date always is (RFC 9110 section 5.6.7)."""
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"{text[:100]!r} is not an HTTP date") from exc
    return in_range(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC), text)


def in_range(moment: datetime, text: str = "") -> datetime:
    """``moment`` in UTC, if it lies between ``EARLIEST`` and ``LATEST``; else ``ValueError``."""
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:  # an offset pushing it past year 1 or 9999
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        shown = text[:100] or moment.isoformat()
        raise ValueError(f"time {shown!r} is out of range (1970 to 8999)")
    return utc


def _trim_fraction(value: str) -> str:
    """Python parses at most microseconds; Google sends up to nanoseconds."""
    head, dot, rest = value.partition(".")
    if not dot:
        return value
    digits = ""
    while rest and rest[0].isdigit():
        digits, rest = digits + rest[0], rest[1:]
    if not digits:
        raise ValueError(f"timestamp {value[:100]!r} has an empty fraction")
    return f"{head}.{digits[:6].ljust(6, '0')}{rest}"


def floor_to_period(moment: datetime, period_seconds: int) -> datetime:
    """The start of the schedule slot that ``moment`` falls in (slots aligned to the epoch)."""
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % period_seconds, UTC)
