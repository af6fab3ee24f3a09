"""What a handler returned or raised, made storable in any database and readable by any client."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import DBAPIError

from consumer.db.engine import is_unavailable, sqlstate
from consumer.wire import text

MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_STRING_CHARS = 100_000
MAX_INT_BITS = 1000
"""Larger integers are kept as text: JSON encoders refuse ints of more than 4300 digits."""
MAX_RESULT_CHARS = 1_000_000
EXCERPT_CHARS = 2000
SCALAR_BOUND = 320
"""At most this many characters of JSON for a number, a boolean or null, with its separator (an
integer of ``MAX_INT_BITS`` bits has 302 digits)."""
ESCAPE_FACTOR = 6
"""A character of a string takes at most six in JSON (``\\u001f``)."""


def describe(exc: BaseException) -> str:
    """A storable summary; database errors name their kind only (their text carries SQL and
    parameters, which belong in the log, not in responses)."""
    if isinstance(exc, DBAPIError):
        kind = "database unavailable" if is_unavailable(exc) else "database error"
        code = sqlstate(exc)
        return f"{kind}: {type(exc.orig).__name__}" + (f" (SQLSTATE {code})" if code else "")
    return text.describe(exc)


def json_safe_result(result: Any) -> dict[str, Any]:
    """A handler's result as a JSON object any database can store (and any client can read):
    the one place every verdict's details pass, so no result can make the finish fail.

    Strings lose NULs and lone surrogates; ``NaN`` and infinities become strings; nesting stops
    at ``MAX_DEPTH`` (a cycle too), the whole at ``MAX_VALUES`` values, and a result longer than
    ``MAX_RESULT_CHARS`` as JSON is kept as an excerpt."""
    if result is None:
        return {}
    storable = _Storable()
    converted = storable.convert(result, MAX_DEPTH)
    details = converted if isinstance(converted, dict) else {"result": converted}
    if storable.bound + SCALAR_BOUND <= MAX_RESULT_CHARS:
        return details  # proved small by the walk: no encoding just to measure it (a push's)
    encoded = json.dumps(details, ensure_ascii=False)
    if len(encoded) <= MAX_RESULT_CHARS:
        return details
    return {
        "result_too_large": f"{len(encoded)} characters as JSON, not kept",
        "result_excerpt": encoded[:EXCERPT_CHARS],
    }


class _Storable:
    """One conversion: the values it may still visit, and the containers on its path."""

    def __init__(self) -> None:
        self.left = MAX_VALUES
        self.path: set[int] = set()
        self.bound = 0
        """An upper bound on the length of the converted value as JSON."""

    def convert(self, value: Any, depth: int) -> Any:
        self.left -= 1
        self.bound += SCALAR_BOUND
        if isinstance(value, str):
            return self._string(value, MAX_STRING_CHARS)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return (
                int(value)
                if value.bit_length() <= MAX_INT_BITS
                else f"<integer of {value.bit_length()} bits>"
            )
        if isinstance(value, float):
            return float(value) if math.isfinite(value) else str(value)
        if not isinstance(value, Mapping | list | tuple):
            return self._string(str(value), None)
        if depth <= 0 or self.left <= 0 or id(value) in self.path:
            return f"<not kept: deeper than {MAX_DEPTH} levels, a cycle or too many values>"
        self.path.add(id(value))
        try:
            return self._container(value, depth - 1)
        finally:
            self.path.discard(id(value))

    def _container(self, value: Mapping[Any, Any] | list[Any] | tuple[Any, ...], depth: int) -> Any:
        if isinstance(value, Mapping):
            return {self._string(str(k), None): self.convert(v, depth) for k, v in value.items()}
        return [self.convert(item, depth) for item in value]

    def _string(self, value: str, limit: int | None) -> str:
        kept = text.storable(value) if limit is None else text.storable(value, limit=limit)
        self.bound += ESCAPE_FACTOR * len(kept) + SCALAR_BOUND
        return kept
