"""Tick schedules: a fixed period or a cron expression in a time zone, and the slot arithmetic
that keys, coalesces and refuses ticks (docs/architecture.md §2.1 and §2.3). Pure: no I/O, no clock.

Cloud Scheduler publishes no scheduled time, so a tick's ``publishTime`` is all we have: its
*slot* is the latest scheduled fire time at or before it, and every copy of one run (a
redelivery, a duplicated Scheduler run) shares that slot and so the inbox key.

The settings syntax (``CONSUMER_TICK_PERIODS``) is ``task=SECONDS`` or
``task=cron:EXPRESSION[@TIME_ZONE]``, items separated by commas (a comma inside a cron expression
stays part of it: cron fields never contain ``=``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from consumer.wire import jitter as jitter_window
from consumer.wire.timeutil import floor_to_period

CRON_PREFIX = "cron:"
DEFAULT_TIME_ZONE = "UTC"
ITEM_SEPARATOR = re.compile(r",\s*(?=[^,=]*=)")
"""A comma followed by ``name=``: the next item starts there (cron lists like 9,17 do not)."""
PROBE_START = datetime(2024, 1, 1, tzinfo=UTC)


class ScheduleError(ValueError):
    """A schedule that cannot be used: a bad period, cron expression or time zone."""


@dataclass(frozen=True)
class Every:
    """Slots of a fixed length, aligned to the Unix epoch (``period_seconds``)."""

    seconds: int

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, int):
            raise ScheduleError(f"a period must be a whole number of seconds, not {self.seconds!r}")
        if self.seconds <= 0:
            raise ScheduleError("a period must be positive")

    def slot_of(self, moment: datetime) -> datetime:
        return floor_to_period(moment, self.seconds)

    def previous(self, slot: datetime) -> datetime:
        """The slot before ``slot``."""
        return slot - timedelta(seconds=self.seconds)

    def recent(self, now: datetime, count: int) -> datetime:
        """The oldest of the ``count`` latest slots begun at or before ``now``."""
        return self.slot_of(now) - timedelta(seconds=self.seconds * (count - 1))

    def following(self, slot: datetime) -> datetime:
        """The slot after ``slot``."""
        return slot + timedelta(seconds=self.seconds)

    def __str__(self) -> str:
        return str(self.seconds)


@dataclass(frozen=True)
class Cron:
    """Fire times of a five-field (unix-cron, as Cloud Scheduler) expression in an IANA zone.

    Daylight saving follows cronsim, which follows Debian's cron: a fire time in the skipped hour
    runs at the jump; in the repeated hour a fixed-time job runs once, an hourly one twice."""

    expression: str
    timezone: str = DEFAULT_TIME_ZONE

    def __post_init__(self) -> None:
        if len(self.expression.split()) != 5:
            raise ScheduleError(f"cron expression {self.expression!r} must have five fields")
        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"unknown time zone {self.timezone!r}") from None
        try:
            next(CronSim(self.expression, PROBE_START.astimezone(zone)))
        except CronSimError as exc:
            raise ScheduleError(f"cron expression {self.expression!r}: {exc}") from None
        except StopIteration:
            raise ScheduleError(f"cron expression {self.expression!r} never fires") from None

    def slot_of(self, moment: datetime) -> datetime:
        """The latest fire time at or before ``moment``."""
        return self._fire_before(moment + timedelta(microseconds=1))

    def previous(self, slot: datetime) -> datetime:
        """The fire time before ``slot``."""
        return self._fire_before(slot)

    def recent(self, now: datetime, count: int) -> datetime:
        """The oldest of the ``count`` latest fire times at or before ``now``."""
        return self._fire_before(now + timedelta(microseconds=1), count)

    def following(self, slot: datetime) -> datetime:
        """The fire time after ``slot``."""
        try:
            return next(CronSim(self.expression, slot.astimezone(ZoneInfo(self.timezone))))
        except StopIteration:
            raise ScheduleError(f"{self} has no fire time after {slot.isoformat()}") from None

    def _fire_before(self, moment: datetime, count: int = 1) -> datetime:
        """The ``count``-th fire time strictly before ``moment``, in UTC."""
        fires = CronSim(self.expression, moment.astimezone(ZoneInfo(self.timezone)), reverse=True)
        try:
            for _ in range(count - 1):
                next(fires)
            return next(fires).astimezone(UTC)
        except StopIteration:  # cronsim looks back 50 years
            raise ScheduleError(f"{self} has no fire time before {moment.isoformat()}") from None

    def __str__(self) -> str:
        return f"{CRON_PREFIX}{self.expression}@{self.timezone}"


Schedule = Every | Cron


def parse(text: str) -> Schedule:
    """``SECONDS`` or ``cron:EXPRESSION[@TIME_ZONE]`` (the zone defaults to UTC)."""
    value = text.strip()
    if not value.startswith(CRON_PREFIX):
        if not (value.isascii() and value.isdigit()):
            raise ScheduleError(f"expected seconds or cron:EXPRESSION[@ZONE], got {value!r}")
        return Every(int(value))
    expression, at, zone = value[len(CRON_PREFIX) :].partition("@")
    return Cron(" ".join(expression.split()), zone.strip() if at else DEFAULT_TIME_ZONE)


def parse_overrides(raw: str) -> dict[str, Schedule]:
    """``task=SCHEDULE`` items separated by commas; each problem names its task."""
    schedules: dict[str, Schedule] = {}
    for item in filter(None, (part.strip() for part in ITEM_SEPARATOR.split(raw))):
        task, sep, value = item.partition("=")
        if not sep or not task.strip():
            raise ScheduleError(f"expected task=seconds or task=cron:EXPRESSION, got {item!r}")
        try:
            schedules[task.strip()] = parse(value)
        except ScheduleError as exc:
            raise ScheduleError(f"task {task.strip()!r}: {exc}") from None
    return schedules


def as_schedule(value: Schedule | int) -> Schedule:
    """A schedule; a bare number is a period in seconds (how overrides were written before)."""
    return Every(value) if isinstance(value, int) else value


def interval_at(schedule: Schedule, now: datetime) -> float:
    """Seconds between the latest fire time and the one before it: a cron task's period now."""
    slot = schedule.slot_of(now)
    return (slot - schedule.previous(slot)).total_seconds()


def stale_reason(schedule: Schedule, slot: datetime, now: datetime, max_age_fires: int) -> str:
    """Why a tick's slot is too old to run (a backlog is coalesced), or ``""``: it is stale when
    older than the ``max_age_fires`` latest fire times at or before ``now``."""
    oldest = schedule.recent(now, max_age_fires)
    if slot < oldest:
        return f"tick slot {slot.isoformat()} is older than slot {oldest.isoformat()}"
    return ""


def future_reason(slot: datetime, now: datetime, tolerance_seconds: float) -> str:
    """Why a tick's slot has not begun by our clock (forged or badly skewed), or ``""``."""
    ahead = (slot - now).total_seconds()
    if ahead > tolerance_seconds:
        return (
            f"tick slot {slot.isoformat()} is in the future: it begins {ahead:.0f} s after "
            f"our clock (tolerance {tolerance_seconds:g} s); nothing was recorded"
        )
    return ""


class Overlap(StrEnum):
    """What a slot's tick does while another run of its task still holds a live claim."""

    ALLOW = "allow"
    """Run anyway (the behaviour before overlap policies existed: slots may overlap)."""
    SKIP = "skip"
    """Record the slot ``skipped`` with the run it yields to, and acknowledge it."""
    WAIT = "wait"
    """Record nothing and answer 503, so the delivery is retried once the run may be over."""


class CatchUpMode(StrEnum):
    LATEST = "latest"
    ONCE = "once"
    ALL = "all"


MAX_CATCH_UP = 1000
"""The most missed slots an ``all:N`` policy may run (each is a run of the handler)."""


@dataclass(frozen=True)
class CatchUp:
    """Which missed slots (after the completed slot, before the ones the stale rule still runs)
    get runs of their own: none (``latest``), one for all of them (``once``), or each of the
    ``limit`` latest (``all:N``)."""

    mode: CatchUpMode = CatchUpMode.LATEST
    limit: int = 0

    def __post_init__(self) -> None:
        if self.mode is CatchUpMode.ALL and not 1 <= self.limit <= MAX_CATCH_UP:
            raise ScheduleError(f"catch-up all:N needs N in 1..{MAX_CATCH_UP}, got {self.limit}")

    @classmethod
    def parse(cls, text: str) -> CatchUp:
        """``latest``, ``once`` or ``all:N``."""
        mode, _, count = text.strip().partition(":")
        if mode == CatchUpMode.ALL:
            if not (count.isascii() and count.isdigit()):
                raise ScheduleError(f"catch-up all needs a count, as all:5, got {text!r}")
            return cls(CatchUpMode.ALL, int(count))
        if mode not in (CatchUpMode.LATEST, CatchUpMode.ONCE) or count:
            raise ScheduleError(f"catch-up must be latest, once or all:N, got {text!r}")
        return cls(CatchUpMode(mode))

    def __str__(self) -> str:
        return f"all:{self.limit}" if self.mode is CatchUpMode.ALL else self.mode.value


@dataclass(frozen=True)
class TickPolicy:
    """A tick task's overlap, catch-up and jitter policies (docs/flow-control.md)."""

    overlap: Overlap = Overlap.ALLOW
    catch_up: CatchUp = CatchUp()
    jitter: float = 0.0
    """Seconds of a slot's window its run starts in, at an offset of the task and slot."""

    @classmethod
    def of(cls, overlap: str = "allow", catch_up: str = "latest", jitter: str = "0") -> TickPolicy:
        """From their names; a bad one raises ``ScheduleError`` naming it."""
        try:
            chosen = Overlap(overlap)
        except ValueError:
            raise ScheduleError(f"overlap must be allow, skip or wait, got {overlap!r}") from None
        if (window := jitter_window.parse_jitter(str(jitter))) is None:
            raise ScheduleError(f"jitter must be a duration such as 30s or 5m, got {jitter!r}")
        return cls(chosen, CatchUp.parse(catch_up), window)

    def named(self) -> dict[str, str]:  # as ``of`` takes them
        return {"overlap": self.overlap, "catch_up": str(self.catch_up), "jitter": f"{self.jitter}"}

    def __str__(self) -> str:
        return f"overlap={self.overlap} catch_up={self.catch_up} jitter={self.jitter:g}s"


def check_jitter(schedule: Schedule, policy: TickPolicy) -> None:
    """A jitter window longer than the shortest gap between slots is a ``ScheduleError``."""
    if policy.jitter > (gap := jitter_window.shortest_gap(schedule, PROBE_START)):
        raise ScheduleError(f"a jitter of {policy.jitter:g} s is longer than the period {gap:g} s")


POLICY_FIELDS = ("overlap", "catch_up", "jitter")


def parse_policies(raw: str) -> dict[str, dict[str, str]]:
    """``TASK.overlap=skip,TASK.catch_up=all:5``: each task's named policies, checked one by one
    (the task name is everything before the last dot); each problem names its item."""
    found: dict[str, dict[str, str]] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, value = item.partition("=")
        task, dot, field_name = name.strip().rpartition(".")
        if not (sep and dot and task) or field_name not in POLICY_FIELDS:
            raise ScheduleError(
                f"expected TASK.overlap=, TASK.catch_up= or TASK.jitter=, got {item!r}"
            )
        chosen = {**found.get(task, {}), field_name: value.strip()}
        try:
            TickPolicy.of(**chosen)
        except ScheduleError as exc:
            raise ScheduleError(f"task {task!r}: {exc}") from None
        found[task] = chosen
    return found


def missed_slots(
    schedule: Schedule, last: datetime, oldest_current: datetime, limit: int
) -> list[datetime]:
    """The ``limit`` latest slots after ``last`` (the completed one) and before
    ``oldest_current`` (the oldest slot the stale rule still runs), oldest first."""
    slots: list[datetime] = []
    slot = schedule.previous(oldest_current)
    while slot > last and len(slots) < limit:
        slots.append(slot)
        slot = schedule.previous(slot)
    return slots[::-1]
