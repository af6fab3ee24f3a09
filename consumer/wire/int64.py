"""GCS int64 fields (``generation``, ``metageneration``, ``size``) as they arrive in JSON.

proto3's JSON mapping writes an int64 as a decimal string, and accepts a JSON number too;
Google's own CloudEvents test data has ``"generation": 96883251``. Both are accepted here,
exactly: a JSON integer is an exact Python ``int``; a number written with a fraction or an
exponent (``96883251.0``, ``9.6883251e7``) is accepted only when it is whole and below 2**53,
where every float is exact (a ``Decimal`` from ``parse_float=Decimal`` is exact at any size),
so no value is ever rounded into another object's generation.
Negative values and values past the int64 range are refused, naming the field and the value.

Pure and import-light: the envelope classifier calls it for every storage event.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

INT64_MAX = (1 << 63) - 1
EXACT_FLOAT_LIMIT = 1 << 53
DIGITS = re.compile(r"[0-9]{1,19}")


class NotInt64(ValueError):
    """The value is no non-negative int64; the message says why."""


def int64_text(value: Any, label: str) -> str:
    """The field as a decimal string: a string is kept as written (keys made from it stay as
    they were), a number becomes its canonical digits. Raise ``NotInt64`` otherwise."""
    if isinstance(value, str):
        if not DIGITS.fullmatch(value) or int(value) > INT64_MAX:
            problem = f"must be a decimal integer in 0..{INT64_MAX}, got {_shown(value)}"
            raise NotInt64(f"'{label}' {problem}")
        return value
    return str(_number(value, label))


def optional_int64(value: Any, label: str) -> int | None:
    """``None`` when absent or empty, else the exact value (see ``int64_text``)."""
    return None if value in (None, "") else int(int64_text(value, label))


def _number(value: Any, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise NotInt64(f"'{label}' must be an integer (a JSON number or a decimal string), "
                       f"got {type(value).__name__}")  # fmt: skip
    if isinstance(value, float | Decimal):
        value = _whole(value, label)
    if not 0 <= value <= INT64_MAX:
        raise NotInt64(f"'{label}' must be in 0..{INT64_MAX}, got {value}")
    return value


def _whole(value: float | Decimal, label: str) -> int:
    """A number written with a fraction or an exponent. Parsed as ``Decimal`` it is exact (the
    size is checked first: ``int(Decimal("1e999999999"))`` would take forever); parsed as a
    float it is exact only if whole and below 2**53."""
    if isinstance(value, Decimal):  # parsed exactly: any whole value in range is exact
        if not value.is_finite() or value.adjusted() > 18 or value != value.to_integral_value():
            raise NotInt64(
                f"'{label}' must be a whole number in 0..{INT64_MAX}, got {_shown(value)}"
            )
        return int(value)
    finite = math.isfinite(value)
    if finite and abs(value) >= EXACT_FLOAT_LIMIT:
        raise NotInt64(
            f"'{label}' {_shown(value)} is past 2**53 in a non-integer form and may have been "
            "rounded; send it as a JSON integer or a decimal string"
        )
    if not finite or value != int(value):
        raise NotInt64(f"'{label}' must be a whole number in 0..{INT64_MAX}, got {_shown(value)}")
    return int(value)


def _shown(value: Any, limit: int = 40) -> str:
    text = str(value) if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
