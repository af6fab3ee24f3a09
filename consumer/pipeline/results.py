"""What a handler returned or raised, made storable in any database and readable by any client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import DBAPIError

from consumer.db.engine import is_unavailable, sqlstate
from consumer.wire import text


def describe(exc: BaseException) -> str:
    """A storable summary; database errors name their kind only (their text carries SQL and
    parameters, which belong in the log, not in responses)."""
    if isinstance(exc, DBAPIError):
        kind = "database unavailable" if is_unavailable(exc) else "database error"
        code = sqlstate(exc)
        return f"{kind}: {type(exc.orig).__name__}" + (f" (SQLSTATE {code})" if code else "")
    return text.describe(exc)


def json_safe_result(result: Any) -> dict[str, Any]:
    """A handler's result as a JSON object any database can store (and any client can read)."""
    if result is None:
        return {}
    if not isinstance(result, Mapping):
        return {"result": _storable_json(result)}
    return {str(key): _storable_json(value) for key, value in result.items()}


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return text.storable(value, limit=100_000)
    if isinstance(value, Mapping):
        return {text.storable(str(k)): _storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_json(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return text.storable(str(value))
