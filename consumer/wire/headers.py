"""Header names and values from configuration or job payloads, checked before they reach a wire.

RFC 5322 (section 2.2) allows a field name of printable US-ASCII except the colon (33..126, not
58); a CR or LF anywhere, in a name or a value, would start a new header line (``Bcc: ...``).
"""

from __future__ import annotations

FIELD_NAME_CHARS = frozenset(chr(c) for c in range(33, 127)) - {":"}
LINE_BREAKS = frozenset("\r\n")


def header_problem(name: str, value: str) -> str | None:
    """Why this header cannot be sent, or None. The value is never quoted (it may be a secret)."""
    if not name or not set(name) <= FIELD_NAME_CHARS:
        return f"header name {name[:60]!r} is not a valid field name (RFC 5322)"
    if set(value) & LINE_BREAKS or "\0" in value:
        return f"header {name!r} has a line break or NUL in its value"
    return None


def checked_headers(headers: object) -> list[tuple[str, str]]:
    """Extra headers of a job payload (a JSON object of strings); ``ValueError`` names the fault."""
    if headers is None or headers == {}:
        return []
    if not isinstance(headers, dict):
        raise ValueError("'headers' must be an object of header names to values")
    checked = []
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str | int | float):
            raise ValueError("'headers' must map header names to strings")
        problem = header_problem(name, str(value))
        if problem:
            raise ValueError(problem)
        checked.append((name, str(value)))
    return checked
