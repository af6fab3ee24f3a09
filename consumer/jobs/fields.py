"""What a producer may set in a job's payload: each kind declares its fields.

Producers outside the service's own code (a row of an uploaded file, a message on the jobs
topic) are filtered to the fields their kind declares, so whoever can upload a CSV or publish a
message can fill in a message but cannot, say, add a ``bcc`` or change the sender: those come
from the storage rule or the settings. Trusted Python code (``consumer.enqueue``) is not
filtered: it is the service's own code and sets what it sets.

A kind declares its fields by being registered as a ``JobKind``; a plain function declares none,
and its producers are not filtered (the kind reads what it reads: its author decides), unless it
replaces a built-in kind: a plain function registered as ``email`` keeps ``email``'s filter, so
replacing the sender never lifts the rule that producers cannot add a ``bcc`` or a ``from``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from consumer.pipeline.extensions import Functions

EMAIL_FIELDS = frozenset({"to", "subject", "text", "html"})
"""What a producer may set in an ``email`` job: the recipient and the content."""
BUILT_IN_FIELDS = {"email": EMAIL_FIELDS}
"""The built-in kinds' declarations, for a caller without a registry at hand."""


@dataclass(frozen=True)
class JobKind:
    """A job kind's function and the payload fields its producers may set; called like the
    function, so the sweep runs it as any other kind."""

    run: Callable[..., Any]
    producer_fields: frozenset[str]

    def __call__(self, context: Any, job: Any) -> Any:
        return self.run(context, job)


def kind(run: Callable[..., Any], producer_fields: Collection[str]) -> JobKind:
    """``registry.job_kinds.add("x", kind(run_x, ["to", "name"]))``."""
    return JobKind(run, frozenset(producer_fields))


def producer_fields(kinds: Functions | None, name: str) -> frozenset[str] | None:
    """The fields producers of ``name`` may set; ``None``: the kind declares none (unfiltered).
    Without ``kinds`` (a registry's ``job_kinds``), or when the registered function declares
    none: the built-in kinds' declarations."""
    function = kinds.get(name) if kinds is not None else None
    if isinstance(function, JobKind):
        return function.producer_fields
    return BUILT_IN_FIELDS.get(name)


def restricted(
    payload: Mapping[str, Any], allowed: frozenset[str] | None
) -> tuple[dict[str, Any], list[str]]:
    """The payload with only the ``allowed`` fields, and the names of those dropped (sorted)."""
    if allowed is None:
        return dict(payload), []
    kept = {name: value for name, value in payload.items() if name in allowed}
    return kept, sorted(name for name in payload if name not in allowed)
