"""A target's answer onto the outcome table (docs/architecture.md §3): 2xx done, with a bounded JSON
answer as the handler's result; 408, 429 and 5xx retry (``Retryable``); a redirect is not
followed and, like any other 4xx, is permanent (``Permanent``: recorded dead, replayable).

Only a bounded head of the body is kept: a 2xx's status is the answer, its body a report, so a
huge body, or one that is not strict JSON (``NaN``, ``1e999``, nesting deeper than
``MAX_ANSWER_DEPTH``, garbage), is summarised, never stored as it is: whatever the body, a 2xx is
recorded ``done`` and the target is not called again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from consumer.errors import Permanent, Retryable
from consumer.wire import text
from consumer.wire.json_limits import strict_loads
from consumer.wire.timeutil import parse_http_date

MAX_ANSWER_BYTES = 64 * 1024
"""The most of a body kept as the handler's result (and read at all)."""
MAX_ANSWER_DEPTH = 64
"""Deeper JSON is summarised: every database and client can hold this much nesting."""
EXCERPT_CHARS = 200
RETRY_STATUSES = frozenset({408, 429})


@dataclass(frozen=True)
class Answer:
    """What a target answered: the status, its headers and the head of its body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool = False
    """The body was longer than ``MAX_ANSWER_BYTES``."""
    complete: bool = True
    """False when the body stopped arriving before the deadline."""

    @property
    def retryable(self) -> bool:
        return self.status in RETRY_STATUSES or self.status >= 500


def result(target: str, answer: Answer) -> dict[str, Any]:
    """The handler's result for ``answer``; raises what a failure means."""
    status = answer.status
    if 200 <= status < 300:
        return {"target": target, "status": status, **_summary(answer)}
    if 300 <= status < 400:
        where = answer.headers.get("Location", "")
        raise Permanent(
            f"target {target!r} answered HTTP {status} (redirect to {where!r}), not followed:"
            " configure the final URL"
        )
    failure = f"target {target!r} answered HTTP {status}{_excerpt(answer)}"
    if answer.retryable:
        raise Retryable(failure)
    raise Permanent(failure)


def retry_after(answer: Answer, now: datetime | None = None) -> float | None:
    """Seconds the target asked us to wait (``Retry-After``: seconds or an HTTP date), or None."""
    raw = answer.headers.get("Retry-After", "").strip()
    if raw.isascii() and raw.isdigit():
        return float(raw)
    try:
        when = parse_http_date(raw)
    except ValueError:
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _summary(answer: Answer) -> dict[str, Any]:
    """A JSON body as it is, or what was received instead of one."""
    if answer.complete and not answer.truncated and answer.body:
        try:
            return {"answer": strict_loads(answer.body, MAX_ANSWER_DEPTH)}
        except (ValueError, RecursionError):
            pass
    summary: dict[str, Any] = {"answer_bytes": len(answer.body)}
    if answer.truncated:
        summary["answer_truncated"] = f"more than {MAX_ANSWER_BYTES} bytes, not kept"
    elif not answer.complete:
        summary["answer_incomplete"] = "the body did not arrive before the deadline"
    elif answer.body:
        summary["answer_excerpt"] = _text(answer.body)
    return summary


def _excerpt(answer: Answer) -> str:
    return f": {_text(answer.body)}" if answer.body else ""


def _text(body: bytes) -> str:
    return text.storable(body[: EXCERPT_CHARS * 4].decode("utf-8", "replace"), EXCERPT_CHARS)
