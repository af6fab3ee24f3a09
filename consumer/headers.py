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
