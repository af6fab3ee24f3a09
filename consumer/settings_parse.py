"""Environment strings to typed setting values; a ValueError names what was expected."""

from __future__ import annotations

import dataclasses
from typing import Any

from consumer.schedule import Schedule, parse_overrides


def convert(spec: dataclasses.Field[Any], raw: str) -> Any:
    """The value of ``raw`` for the field's type (numbers are range-checked later)."""
    kind = spec.type if isinstance(spec.type, str) else getattr(spec.type, "__name__", "")
    if kind == "bool":
        return _to_bool(raw)
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"expected a whole number, got {raw!r}") from None
    if kind.startswith("tuple"):
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    if kind.startswith("Mapping"):
        return _to_periods(raw)
    return raw


def _to_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _to_periods(raw: str) -> dict[str, Schedule]:
    """``task=seconds`` or ``task=cron:EXPRESSION[@ZONE]`` items; a ``ScheduleError`` is a
    ``ValueError`` naming the task."""
    return parse_overrides(raw)
