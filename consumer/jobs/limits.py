"""Which limit applies to a job kind, and what it allows now: pure functions over the declared,
configured and operator-changed limits, a kind's running count and its rate's state.

Precedence: a kind's declaration (``@registry.job_kind("x", cap=2)``, ``registry.job_limit``, or
the ``cap``/``rate`` keys of an HTTP target that serves the kind), then ``CONSUMER_JOB_LIMITS``,
then an operator's change stored in ``job_flow`` (``consumer jobs limit``).

The rate is a GCRA (generic cell rate algorithm) in its scheduling form: a kind's state is one
time, its *theoretical arrival time* (TAT), when the next start is due on schedule. A claim takes
the slots TAT, TAT + interval, ... that begin within ``LOOKAHEAD_SECONDS`` of now, moves the TAT
past them, and the sweeper starts each job at its slot (``Throttle.start_at``). The starts are
spaced one interval apart whichever sweeper runs them; a kind idle for a while starts again
from now, so no burst is saved up. Any window of ``W`` seconds holds ``W / interval + 1``
starts, plus those of slots a late sweeper started behind time (at most a look-ahead's worth).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import cache
from typing import NamedTuple

from consumer.config.flow import NO_LIMIT, JobLimit, Rate, parse_changes
from consumer.config.settings import Settings
from consumer.config.targets import TargetSpec
from consumer.pipeline.registry import Registry

LEAD_SECONDS = 0.05
"""A claim's first slot is at least this far ahead: the claim commits and its sweeper reaches the
job before the slot, so that it does not start late, bunched with the next sweeper's."""
LOOKAHEAD_SECONDS = 0.06
"""A claim takes the slots that begin within this much after the lead, each job to be started
at its slot: the starts stay spaced, and a kind at 50/s needs a claim for every three starts,
not for every one (a claim is a transaction; a short look-ahead keeps one sweeper from being
handed more starts than it can make on time, one after another)."""
CAP_SHARE = 4
"""A claim takes at most a quarter of a cap (at least one job): a sweeper runs its batch one job
at a time, so the jobs it holds beyond the one running hold slots idle; small takes spread a
small cap's slots over sweepers, so that up to ``cap`` jobs do run at once."""
CAPPED_CLAIM_MOST = 100
"""A claim takes at most this many jobs of a capped kind: the room a claim keeps under the cap
for the claims holding the kind's other shards (``consumer.jobs.flow_lock``) is this many each."""


class Allowance(NamedTuple):
    """How many jobs of a kind a claim may take now, and which limit says so (``""``: none)."""

    allowed: int
    reason: str
    limit: JobLimit
    tat: datetime | None


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


def most_per_claim(limit: JobLimit) -> int:
    """The most jobs of a kind one claim may take, whatever is running: its share of the cap
    and the rate's slots within the horizon."""
    most = 1 << 30
    if limit.cap is not None:
        most = min(most, cap_allowance(limit.cap, 0), CAPPED_CLAIM_MOST)
    if limit.rate is not None:
        most = min(most, int(HORIZON.total_seconds() / limit.rate.interval) + 1)
    return most


def cap_allowance(cap: int, running: int) -> int:
    """How many jobs a claim may take under ``cap`` with ``running`` already held."""
    return max(0, min(cap - running, max(1, cap // CAP_SHARE)))


LEAD = timedelta(seconds=LEAD_SECONDS)
HORIZON = timedelta(seconds=LEAD_SECONDS + LOOKAHEAD_SECONDS)


def first_slot(tat: datetime | None, now: datetime) -> datetime:
    """The next start on schedule: the TAT, or (if the kind fell idle: no credit is kept) the
    lead from now."""
    return now + LEAD if tat is None else max(tat, now + LEAD)


def rate_allowance(rate: Rate, tat: datetime | None, now: datetime) -> int:
    """How many starts ``rate`` lets a claim at ``now`` take: the slots, one interval apart from
    the first, that begin within the horizon."""
    room = (now + HORIZON - first_slot(tat, now)).total_seconds()
    if room < 0:
        return 0
    return int(room / rate.interval + 1e-9) + 1


def slots(rate: Rate, tat: datetime | None, now: datetime, started: int) -> list[datetime]:
    """When each of ``started`` jobs may start."""
    first = first_slot(tat, now)
    return [first + timedelta(seconds=rate.interval * i) for i in range(started)]


def advanced(rate: Rate, tat: datetime | None, now: datetime, started: int) -> datetime:
    """The TAT after ``started`` starts claimed at ``now``."""
    return first_slot(tat, now) + timedelta(seconds=rate.interval * started)


def next_start(rate: Rate, tat: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` until a claim may take a start again (0: now)."""
    if tat is None:
        return 0.0
    return max(0.0, (tat - HORIZON - now).total_seconds())
