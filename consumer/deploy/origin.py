"""The origin of a URL (scheme, host, port): the boundary our secret warm headers never cross.

Redirects are followed, and sitemap URLs accepted, only within the origin they started from: a
change of host or port could hand the ``CONSUMER_WARM_HEADERS`` to somebody else, and a change
from https to http would send them in clear text.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def origin(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an http(s) URL, or ``None`` for anything else (other schemes,
    no host, an invalid port)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port


def same_origin(url: str, other: str) -> bool:
    """True if both are http(s) URLs of one scheme, host and port."""
    mine = origin(url)
    return mine is not None and mine == origin(other)
