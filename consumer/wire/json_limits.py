"""A JSON document's size in values, counted on its bytes before it is parsed.

The size limit alone does not bound a worker's memory: 14 MiB of ``{}`` is 4.9 million dicts,
about 800 MB once parsed. A Python object costs 50-200 bytes where its JSON text costs 2, so the
number of values, not the bytes, is what must be bounded, and before ``json.loads`` builds them.
Strings are cut out first (their contents may hold any character), then the structural
characters are counted in C: every value but the first is preceded by a ``,`` or a ``:``, or opens
a container. The count is an upper bound on the values (object keys included), never below it.
"""

from __future__ import annotations

import re

DEFAULT_MAX_NODES = 200_000
# A JSON string, unrolled ("normal* (escape normal*)*") so a long string is one fast scan.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def count_values(raw: bytes) -> int:
    """Upper bound of the values (and keys) in the JSON text ``raw``."""
    return _marks(_STRING.sub(b"0", raw))


def too_many_values(raw: bytes, limit: int) -> bool:
    """Cheap first: counted with the strings left in, the marks are already an upper bound, and
    a typical body (base64 data: no marks) is settled at C speed without the string scan."""
    return _marks(raw) > limit and count_values(raw) > limit


def _marks(text: bytes) -> int:
    return 1 + sum(text.count(mark) for mark in (b",", b":", b"[", b"{"))
