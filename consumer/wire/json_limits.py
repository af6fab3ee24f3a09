"""A JSON document's size in values, counted on its bytes before it is parsed.

The size limit alone does not bound a worker's memory: 14 MiB of ``{}`` is 4.9 million dicts,
about 800 MB once parsed. A Python object costs 50-200 bytes where its JSON text costs 2, so the
number of values, not the bytes, is what must be bounded, and before ``json.loads`` builds them.
Strings are cut out first (their contents may hold any character), then the structural
characters are counted in C: every value but the first is preceded by a ``,`` or a ``:``, or opens
a container. The count is an upper bound on the values (object keys included), never below it.

``strict_loads`` parses what every database stores: PostgreSQL refuses ``NaN`` and infinities in
JSON, which Python's parser accepts.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

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


def strict_loads(raw: bytes | str, max_depth: int | None = None) -> Any:
    """``raw`` parsed as strict JSON, which every database stores: ``NaN``, ``Infinity`` and
    numbers too big for a float (``1e999``, which Python reads as infinity) are refused, as is
    nesting deeper than ``max_depth``; ``ValueError`` (``RecursionError`` for nesting deeper
    than the interpreter's stack, before ``max_depth`` is looked at)."""
    value = json.loads(raw, parse_constant=_refuse, parse_float=_finite)
    if max_depth is not None and depth(value) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def depth(value: Any) -> int:
    """Nesting depth of a parsed document, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(node, dict):
            stack.extend((child, level + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, level + 1) for child in node)
    return deepest


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"{literal[:40]} does not fit a float")
    return number
