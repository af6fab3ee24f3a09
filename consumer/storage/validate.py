"""Row validation for ``import-jobs``: one reason per rejected row, or ``""``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from consumer.config.import_options import ImportOptions
from consumer.jobs.fields import restricted

MAX_ADDRESS_CHARS = 998
"""RFC 5322's line limit: longer is not an address, and is refused before the regex sees it."""
_MAILBOX = r"[^\s<>@,;\"]+@[^\s<>@,;\"]+\.[^\s<>@,;\".]+"
ADDRESS = re.compile(rf"{_MAILBOX}|[^<>@,;]*<{_MAILBOX}>")
"""Matched against the stripped text: no surrounding ``\\s*`` that could overlap the display
name (that overlap made matching quadratic in the length)."""

EMPTY: tuple[Any, ...] = (None, "", [])
"""Values that count as absent (``0`` and ``false`` are present, and are no addresses)."""


def row_problem(
    fields: Mapping[str, Any] | None, options: ImportOptions, allowed: frozenset[str] | None = None
) -> str:
    """Why the row cannot become a job, or ``""``."""
    return row_payload(fields, options, allowed)[1]


def row_payload(
    fields: Mapping[str, Any] | None, options: ImportOptions, allowed: frozenset[str] | None = None
) -> tuple[str, str]:
    """The row's payload as JSON text (what the job stores), and why the row cannot become a
    job, or ``""``. Only the fields the rule (``fields``) or else the kind (``allowed``) lets a
    producer set are kept, then the rule's ``set_fields`` are laid over them: a row cannot add
    a recipient or change the sender. The size check has to serialize the row anyway, so the
    text it measured is the one inserted. The cheap checks (presence, size) run before the
    address patterns, so an oversized value is refused without being matched."""
    if fields is None:
        return "", "the row is unreadable"
    fields = producer_row(fields, options, allowed)
    for name in options.required_fields:
        if fields.get(name) in EMPTY:
            return "", f"'{name}' is required"
    payload, problem = _payload(fields, options.max_row_bytes)
    if problem:
        return "", problem
    for name in options.email_fields:
        value = fields.get(name)
        if value not in EMPTY and (problem := _address_problem(name, value)):
            return "", problem
    return payload, ""


def producer_row(
    fields: Mapping[str, Any], options: ImportOptions, allowed: frozenset[str] | None
) -> Mapping[str, Any]:
    """The row as a producer may set it, with the rule's own fields over it."""
    kept = frozenset(options.fields) if options.fields is not None else allowed
    if kept is not None:
        fields = restricted(fields, kept)[0]
    return {**fields, **options.set_fields} if options.set_fields else fields


def _address_problem(name: str, value: Any) -> str:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, str) or not _is_address(item):
            return f"'{name}' is not an email address: {_short(item)}"
    return ""


def _is_address(text: str) -> bool:
    """``a@example.com`` or ``Name <a@example.com>``; one address, with a dotted domain."""
    text = text.strip()
    return len(text) <= MAX_ADDRESS_CHARS and ADDRESS.fullmatch(text) is not None


def _payload(fields: Mapping[str, Any], max_bytes: int) -> tuple[str, str]:
    """The payload must store as JSON on both databases, within the size limit."""
    try:
        payload = _dumps_strings(fields)
    except TypeError:  # a value that is no string (JSON Lines): the general encoder
        payload = ""
    try:
        payload = payload or _dumps(fields)
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        return "", "a value holds an unpaired surrogate (not valid Unicode)"
    except (TypeError, ValueError) as exc:
        return "", f"the row cannot be stored as JSON: {exc}"
    if size > max_bytes:
        return "", f"the row is {size} bytes as JSON, over the {max_bytes}-byte limit"
    return payload, ""


_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_quoted = json.encoder.encode_basestring  # the C one where available


def _dumps_strings(fields: Mapping[str, Any]) -> str:
    """``json.dumps`` for the common row, every value a string (every CSV row), at a third of
    the cost; ``TypeError`` at the first value that is not one."""
    return "{" + ", ".join([f"{_quoted(k)}: {_quoted(v)}" for k, v in fields.items()]) + "}"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
