"""Environment strings to typed setting values; a ValueError names what was expected."""

from __future__ import annotations

import dataclasses
from typing import Any


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


def _to_periods(raw: str) -> dict[str, int]:
    periods: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        task, sep, seconds = item.partition("=")
        if not sep or not task.strip() or not seconds.strip().isdigit():
            raise ValueError(f"expected task=seconds pairs, got {item!r}")
        periods[task.strip()] = int(seconds)
    return periods
