"""Row validation for ``import-jobs``: one reason per rejected row, or ``""``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from consumer.config.import_options import ImportOptions

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
    """``RowRules(options, allowed).payload(fields)``, for a caller with one row."""
    return RowRules(options, allowed).payload(fields)


class RowRules:
    """An import's rules for its rows, worked out once (``payload`` runs for every row)."""

    def __init__(self, options: ImportOptions, allowed: frozenset[str] | None = None) -> None:
        self.kept = frozenset(options.fields) if options.fields is not None else allowed
        """The fields a producer may set (``None``: any); ``set_fields`` are laid over them."""
        self.set_fields = dict(options.set_fields) if options.set_fields else None
        self.required = options.required_fields
        self.emails = options.email_fields
        self.max_bytes = options.max_row_bytes

    def payload(self, fields: Mapping[str, Any] | None) -> tuple[str, str]:
        """The row's payload as JSON text (what the job stores), and why the row cannot become a
        job, or ``""``. Only the fields the rule (``fields``) or else the kind (``allowed``) lets
        a producer set are kept, then the rule's ``set_fields`` are laid over them: a row cannot
        add a recipient or change the sender. The size check has to serialize the row anyway,
        so the text it measured is the one inserted. The cheap checks (presence, size) run
        before the address patterns, so an oversized value is refused without being matched."""
        if fields is None:
            return "", "the row is unreadable"
        kept = self.kept
        if kept is not None and not kept.issuperset(fields):  # most files hold only kept fields
            fields = {name: value for name, value in fields.items() if name in kept}
        if self.set_fields:
            fields = {**fields, **self.set_fields}
        for name in self.required:
            if fields.get(name) in EMPTY:
                return "", f"'{name}' is required"
        payload, problem = _payload(fields, self.max_bytes)
        if problem:
            return "", problem
        for name in self.emails:
            value = fields.get(name)
            if value not in EMPTY and (problem := _address_problem(name, value)):
                return "", problem
        return payload, ""


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
        payload = _dumps(fields)
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        return "", "a value holds an unpaired surrogate (not valid Unicode)"
    except (TypeError, ValueError) as exc:
        return "", f"the row cannot be stored as JSON: {exc}"
    if size > max_bytes:
        return "", f"the row is {size} bytes as JSON, over the {max_bytes}-byte limit"
    return payload, ""


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, allow_nan=False)``: json's C encoder, made once.
    ``JSONEncoder.encode`` makes a new one for every call, with a dict to catch cycles, which
    parsed rows cannot have; its pure Python fallback where the C one is missing."""
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the stubs
    if make is None:
        return json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    chunks = make(None, _not_json, json.encoder.encode_basestring, None, ": ", ", ",
                  False, False, False)  # fmt: skip
    join = "".join
    return lambda value: join(chunks(value, 0))


_dumps = _encoder()


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
