"""Which limit applies to a job kind, and what it allows now: pure functions over the declared,
configured and operator-changed limits, a kind's running count and its rate's state.

Precedence: a kind's declaration (``@registry.job_kind("x", cap=2)``, ``registry.job_limit``, or
the ``cap``/``rate`` keys of an HTTP target that serves the kind), then ``CONSUMER_JOB_LIMITS``,
then an operator's change stored in ``job_flow`` (``consumer jobs limit``).

The rate is a GCRA (generic cell rate algorithm): a kind's state is one time, its *theoretical
arrival time* (TAT), the time at which the next start would be on schedule. A start is allowed
at ``now`` when ``TAT - tolerance <= now``; each start moves the TAT one interval on. A small
tolerance (``RATE_BURST`` starts) absorbs the sweepers' polling lag without letting a burst
through: any window of ``W`` seconds holds at most ``W / interval + RATE_BURST`` starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import cache

from consumer.config.flow import NO_LIMIT, JobLimit, Rate, parse_changes
from consumer.config.settings import Settings
from consumer.config.targets import TargetSpec
from consumer.pipeline.registry import Registry

RATE_BURST = 2
"""Starts a rate lets through at once after an idle spell (the GCRA's tolerance, in intervals
plus one)."""
CAP_SHARE = 4
"""A claim takes at most a quarter of a cap (at least one job): a sweeper runs its batch one job
at a time, so the jobs it holds beyond the one running hold slots idle; small takes spread a
small cap's slots over sweepers, so that up to ``cap`` jobs do run at once."""


def configured(registry: Registry, settings: Settings) -> dict[str, JobLimit]:
    """Every kind's limit before operators' changes: declared, then changed by the settings."""
    limits = dict(registry.job_limits)
    targets: list[TargetSpec] = [*registry.http_targets.values(), *settings.targets.targets]
    for spec in targets:
        if spec.serves.what == "job_kind" and spec.limit.limited:
            limits[spec.serves.name] = spec.limit
    for kind, changes in settings.flow.limits.items():
        limits[kind] = limits.get(kind, NO_LIMIT).changed(changes)
    return {kind: limit for kind, limit in limits.items() if limit.limited}


def effective(limit: JobLimit, override: str | None) -> JobLimit:
    """``limit`` with an operator's stored change applied (``None``: none)."""
    return limit if override is None else limit.changed(_changes(override))


@cache
def _changes(override: str) -> Mapping[str, object]:
    return parse_changes(override)


def cap_allowance(cap: int, running: int) -> int:
    """How many jobs a claim may take under ``cap`` with ``running`` already held."""
    return max(0, min(cap - running, max(1, cap // CAP_SHARE)))


def tolerance(rate: Rate) -> timedelta:
    return timedelta(seconds=rate.interval * (RATE_BURST - 1))


def rate_allowance(rate: Rate, tat: datetime | None, now: datetime) -> int:
    """How many starts ``rate`` allows at ``now``: those whose schedule, from the TAT on, falls
    within the tolerance."""
    start = now if tat is None else max(tat, now)
    room = (now + tolerance(rate) - start).total_seconds()
    if room < 0:
        return 0
    return int(room / rate.interval + 1e-9) + 1


def advanced(rate: Rate, tat: datetime | None, now: datetime, started: int) -> datetime:
    """The TAT after ``started`` starts at ``now``."""
    start = now if tat is None else max(tat, now)
    return start + timedelta(seconds=rate.interval * started)


def next_start(rate: Rate, tat: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` until ``rate`` allows a start again (0: now)."""
    if tat is None:
        return 0.0
    return max(0.0, (tat - tolerance(rate) - now).total_seconds())
