"""Flow control of job kinds: a concurrency cap and a rate, declared by a kind (or an HTTP target
that serves one) and changed by ``CONSUMER_JOB_LIMITS`` (docs/flow-control.md). Pure: parsing and
checking only (``consumer.jobs.throttle`` enforces them in the claim).

``CONSUMER_JOB_LIMITS`` is comma-separated ``KIND=OPTION;OPTION`` items, each option ``cap:N``
(at most N jobs of the kind running at once across every pod; 0 holds the kind), ``rate:N/INTERVAL``
(at most N starts per interval: ``50/1s``, ``600/1m``, ``5/500ms``), ``group_cap:N`` and
``group_rate:N/INTERVAL`` (the same for each group of the kind's jobs: a tenant, a customer), or
``none`` for any (``cap:none`` lifts a declared cap)::

    CONSUMER_JOB_LIMITS="email=cap:4;rate:50/1s;group_cap:2, report=cap:1"

An option left out keeps the kind's declared value.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from consumer.config.fields import Section, setting
from consumer.wire.jitter import parse_jitter

MAX_CAP = 100_000
MAX_RATE = 100_000
MIN_INTERVAL_SECONDS = 0.001
MAX_INTERVAL_SECONDS = 86_400.0
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
RATE = re.compile(r"(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|h)")
OPTIONS = ("cap", "rate", "group_cap", "group_rate")
CAPS = ("cap", "group_cap")
NONE = "none"

Changes = Mapping[str, Any]
"""A limit's changed options (``OPTIONS``) and their new values (``None``: lifted)."""


@dataclass(frozen=True)
class Rate:
    """At most ``count`` starts per ``per_seconds``."""

    count: int
    per_seconds: float

    @property
    def interval(self) -> float:
        """Seconds between two starts at the steady rate (the GCRA emission interval)."""
        return self.per_seconds / self.count

    def __str__(self) -> str:
        return f"{self.count}/{self.per_seconds:g}s"


@dataclass(frozen=True)
class JobLimit:
    """A kind's flow control: ``cap`` running at once, ``rate`` of starts (``None``: none), and
    the same for each group of its jobs (``group_cap``, ``group_rate``)."""

    cap: int | None = None
    rate: Rate | None = None
    group_cap: int | None = None
    group_rate: Rate | None = None
    group_by: str | None = None
    """The payload field whose value is a job's group when it is enqueued without one."""
    debounce: tuple[float, float] | None = None
    """The quiet window and the longest wait of the kind's debounced jobs, in seconds."""

    @property
    def limited(self) -> bool:
        return self.cap is not None or self.rate is not None or self.grouped

    @property
    def grouped(self) -> bool:
        """Whether each group of the kind's jobs is capped or rated."""
        return self.group_cap is not None or self.group_rate is not None

    def changed(self, changes: Changes) -> JobLimit:
        """This limit with ``changes`` applied (an option not among them is kept)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in OPTIONS}
        return {name: v if v is None or name in CAPS else str(v) for name, v in values.items()}


NO_LIMIT = JobLimit()


def parse_rate(raw: str) -> Rate:
    """``50/1s``, ``50/s``, ``600/1m``, ``5/500ms``; a ``ValueError`` says what is expected."""
    match = RATE.fullmatch(raw.strip())
    if match is None:
        raise ValueError(f"rate must be N/INTERVAL such as 50/1s or 600/1m, got {raw!r}")
    count, amount, unit = int(match[1]), float(match[2] or 1), match[3]
    per_seconds = amount * UNITS[unit]
    if not 1 <= count <= MAX_RATE:
        raise ValueError(f"a rate's count must be 1..{MAX_RATE}, got {count}")
    if not MIN_INTERVAL_SECONDS <= per_seconds <= MAX_INTERVAL_SECONDS:
        raise ValueError(f"a rate's interval must be 1ms..24h, got {raw!r}")
    return Rate(count, per_seconds)


def parse_cap(raw: Any) -> int:
    """A whole number 0..``MAX_CAP`` (text from a variable or the CLI, or a declared int)."""
    if isinstance(raw, bool):
        raise ValueError("cap must be a whole number")
    try:
        cap = int(raw.strip()) if isinstance(raw, str) else raw
    except ValueError:
        raise ValueError(f"cap must be a whole number, got {raw!r}") from None
    if not isinstance(cap, int) or not 0 <= cap <= MAX_CAP:
        raise ValueError(f"cap must be a whole number 0..{MAX_CAP}, got {raw!r}")
    return cap


def declared(
    cap: Any = None,
    rate: Any = None,
    group_cap: Any = None,
    group_rate: Any = None,
    group_by: str | None = None,
    debounce: str | None = None,
) -> JobLimit:
    """A kind's declared limit (keywords of ``registry.job_kind`` or a target's ``cap``/``rate``
    keys): a cap as a number, a rate as ``"50/1s"`` or a ``Rate``; ``group_by``: a payload
    field that groups the kind's jobs."""
    if group_by is not None and not (isinstance(group_by, str) and 0 < len(group_by) <= 200):
        raise ValueError(f"group_by must be a payload field's name, got {group_by!r}")
    values = (cap, rate, group_cap, group_rate)
    chosen = {name: _declared(name, raw) for name, raw in zip(OPTIONS, values, strict=True)}
    return JobLimit(**chosen, group_by=group_by, debounce=parse_debounce(debounce))


MAX_DEBOUNCE_SECONDS = 86_400.0


def parse_debounce(raw: str | None) -> tuple[float, float] | None:
    """``QUIET/LONGEST`` durations, as ``5s/1m``: a kind's debounce (``None``: none)."""
    if raw is None:
        return None
    quiet, _, longest = str(raw).partition("/")
    windows = (parse_jitter(quiet), parse_jitter(longest))
    if windows[0] is None or windows[1] is None or not 0 < windows[0] <= windows[1]:
        raise ValueError(f"debounce must be QUIET/LONGEST such as 5s/1m, got {raw!r}")
    if windows[1] > MAX_DEBOUNCE_SECONDS:
        raise ValueError(f"a debounce's longest wait must be at most a day, got {raw!r}")
    return windows[0], windows[1]


def _declared(name: str, raw: Any) -> Any:
    if raw is None or isinstance(raw, Rate):
        return raw
    return parse_option(name, raw if name in CAPS else str(raw))


def parse_changes(raw: str) -> dict[str, Any]:
    """``cap:4;rate:50/1s`` (either ``none``) to the changes it makes."""
    changes: dict[str, Any] = {}
    for option in filter(None, (part.strip() for part in raw.split(";"))):
        name, sep, value = (piece.strip() for piece in option.partition(":"))
        if not sep or name not in OPTIONS:
            expected = "cap:N, rate:N/INTERVAL, group_cap:N or group_rate:N/INTERVAL"
            raise ValueError(f"expected {expected}, got {option!r}")
        if name in changes:
            raise ValueError(f"{name} is given twice")
        changes[name] = parse_option(name, value)
    if not changes:
        raise ValueError("expected cap:N or rate:N/INTERVAL")
    return changes


def parse_option(name: str, raw: Any) -> Any:
    """One option's new value: a cap, a ``Rate``, or ``None`` for ``none`` (lifted)."""
    if isinstance(raw, str) and raw.strip().lower() == NONE:
        return None
    try:
        return parse_cap(raw) if name in CAPS else parse_rate(raw)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}" if name.startswith("group_") else str(exc)) from None


def changes_of(
    cap: str | None = None,
    rate: str | None = None,
    group_cap: str | None = None,
    group_rate: str | None = None,
) -> dict[str, Any]:
    """The changes an operator asks for by option (``consumer jobs limit --cap/--rate``, the
    dashboard's form): a blank option is left as it is, ``none`` lifts it. Each value is parsed
    on its own, so ``4;rate:1/1s`` is a bad cap, not a second option."""
    raws = (cap, rate, group_cap, group_rate)
    given = {name: raw for name, raw in zip(OPTIONS, raws, strict=True) if raw and raw.strip()}
    if not given:
        raise ValueError("give a cap and/or a rate (or a group cap, a group rate)")
    return {name: parse_option(name, raw) for name, raw in given.items()}


def format_changes(changes: Changes) -> str:
    """The inverse of ``parse_changes`` (how an operator's change is stored)."""
    shown = {name: NONE if value is None else str(value) for name, value in changes.items()}
    return ";".join(f"{name}:{shown[name]}" for name in OPTIONS if name in shown)


def parse_job_limits(raw: str) -> dict[str, dict[str, Any]]:
    """``CONSUMER_JOB_LIMITS``: kind -> changes; a ``ValueError`` names the faulty kind."""
    limits: dict[str, dict[str, Any]] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        kind, sep, options = (piece.strip() for piece in item.partition("="))
        if not sep or not kind:
            raise ValueError(f"expected KIND=cap:N;rate:N/INTERVAL, got {item!r}")
        if kind in limits:
            raise ValueError(f"kind {kind!r} is given twice")
        try:
            limits[kind] = parse_changes(options)
        except ValueError as exc:
            raise ValueError(f"kind {kind!r}: {exc}") from None
    return limits


@dataclass(frozen=True, repr=False)
class FlowSettings(Section):
    """``CONSUMER_JOB_LIMITS``: flow control of job kinds (docs/flow-control.md)."""

    prefix: ClassVar[str] = "JOB_"
    limits: Mapping[str, Mapping[str, Any]] = setting(convert=parse_job_limits, factory=dict)
    """Caps and rates by job kind, over those the kinds declare: ``KIND=cap:N;rate:N/1s`` items,
    comma-separated (``none`` lifts one; ``group_cap:N``, ``group_rate:N/1s`` hold each group of
    the kind). A cap holds the kind's running jobs across every pod; a rate spaces their starts.
    ``consumer jobs limit`` changes them at run time."""
