"""Environment strings to typed setting values, one converter per field (``setting(convert=)``);
a ValueError names what was expected. Numbers are range-checked later, with the other rules."""

from __future__ import annotations

from consumer.wire.schedule import Schedule, parse_overrides


def text(raw: str) -> str:
    return raw


def whole(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"expected a whole number, got {raw!r}") from None


def boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def names(raw: str) -> tuple[str, ...]:
    """Comma-separated items, blanks dropped."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def periods(raw: str) -> dict[str, Schedule]:
    """``task=seconds`` or ``task=cron:EXPRESSION[@ZONE]`` items; a ``ScheduleError`` is a
    ``ValueError`` naming the task."""
    return parse_overrides(raw)
