"""Text that any database can store: PostgreSQL refuses NUL characters, and neither database
encodes a lone surrogate. Error messages come from anywhere, so they pass through here."""

from __future__ import annotations


def is_storable(text: str) -> bool:
    """True if ``text`` can be stored as text by both databases as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def storable(text: str, limit: int = 2000) -> str:
    """``text`` with NULs and unencodable characters escaped, cut to ``limit`` characters."""
    escaped = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    return escaped[:limit]


def describe(exc: BaseException, limit: int = 2000) -> str:
    """An exception as a storable one-line summary."""
    return storable(f"{type(exc).__name__}: {exc}", limit)
