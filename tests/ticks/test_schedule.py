"""Schedule arithmetic (consumer.wire.schedule): slots, previous fire times, daylight saving,
staleness,
future refusal, the settings syntax, and the start-up errors for bad schedules. Pure: no I/O."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given
from hypothesis import strategies as st

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.pipeline.registry import Registry
from consumer.wire.schedule import (
    Cron,
    Every,
    future_reason,
    parse,
    parse_overrides,
    stale_reason,
)

MADRID = ZoneInfo("Europe/Madrid")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def madrid(text: str, fold: int = 0) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=MADRID, fold=fold).astimezone(UTC)


def test_period_slots_are_floored_to_the_epoch() -> None:
    every = Every(300)
    assert every.slot_of(utc("2026-11-30 12:07:59")) == utc("2026-11-30 12:05:00")
    assert every.previous(utc("2026-11-30 12:05:00")) == utc("2026-11-30 12:00:00")
    assert every.recent(utc("2026-11-30 12:07:59"), 3) == utc("2026-11-30 11:55:00")


def test_cron_slot_is_the_latest_fire_at_or_before_publish_time() -> None:
    report = Cron("0 9 * * 1-5", "Europe/Madrid")
    monday_nine = madrid("2026-11-30 09:00")
    assert report.slot_of(monday_nine) == monday_nine  # at: a tick published on the dot
    assert report.slot_of(monday_nine + timedelta(seconds=2)) == monday_nine
    assert report.slot_of(monday_nine - timedelta(microseconds=1)) == madrid("2026-11-27 09:00")
    assert report.previous(monday_nine) == madrid("2026-11-27 09:00")  # Friday: no weekend runs
    assert report.recent(monday_nine + timedelta(hours=1), 3) == madrid("2026-11-26 09:00")


def test_spring_forward_a_fire_in_the_skipped_hour_runs_at_the_jump() -> None:
    """29 March 2026, Madrid: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day."""
    nightly = Cron("30 2 * * *", "Europe/Madrid")
    jump = utc("2026-03-29 01:00")  # 03:00 CEST
    assert nightly.slot_of(jump + timedelta(minutes=5)) == jump
    assert nightly.previous(jump) == madrid("2026-03-28 02:30")
    assert nightly.slot_of(madrid("2026-03-30 02:30") + timedelta(seconds=1)) == madrid(
        "2026-03-30 02:30"
    )
    hourly = Cron("30 * * * *", "Europe/Madrid")  # 01:30 CET, then 03:30 CEST: one hour apart
    assert hourly.previous(madrid("2026-03-29 03:30")) == madrid("2026-03-29 01:30")


def test_fall_back_a_fixed_time_runs_once_an_hourly_schedule_twice() -> None:
    """25 October 2026, Madrid: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice."""
    nightly = Cron("30 2 * * *", "Europe/Madrid")
    first, second = madrid("2026-10-25 02:30", fold=0), madrid("2026-10-25 02:30", fold=1)
    assert second - first == timedelta(hours=1)
    assert nightly.slot_of(second + timedelta(minutes=1)) == first  # one slot: one run
    hourly = Cron("30 * * * *", "Europe/Madrid")
    assert hourly.slot_of(second + timedelta(minutes=1)) == second  # two distinct slots
    assert hourly.previous(second) == first
    assert hourly.previous(first) == madrid("2026-10-25 01:30")


def test_stale_means_older_than_the_latest_fires() -> None:
    report = Cron("0 9 * * 1-5", "Europe/Madrid")
    now = madrid("2026-11-30 08:00")  # Monday before its run: Friday is the latest fire
    assert stale_reason(report, madrid("2026-11-27 09:00"), now, 1) == ""
    assert stale_reason(report, madrid("2026-11-26 09:00"), now, 2) == ""
    assert "older than" in stale_reason(report, madrid("2026-11-26 09:00"), now, 1)
    assert "older than" in stale_reason(report, madrid("2026-11-25 09:00"), now, 2)


def test_stale_for_periods_is_what_it_was() -> None:
    """Before schedules: stale when ``now - slot > max_age * period``; away from slot edges the
    rule in fire times gives the same answers."""
    every = Every(60)
    now = utc("2026-11-30 12:00:01")
    for minutes in range(6):
        slot = every.slot_of(now - timedelta(minutes=minutes))
        for max_age in (1, 2, 3):
            before = now - slot > timedelta(seconds=60 * max_age)
            assert bool(stale_reason(every, slot, now, max_age)) is before


def test_future_reason_allows_the_tolerance_only() -> None:
    now = utc("2026-11-30 12:00:00")
    assert future_reason(now + timedelta(seconds=5), now, 5) == ""
    assert "in the future" in future_reason(now + timedelta(seconds=6), now, 5)
    assert future_reason(now - timedelta(days=3), now, 0) == ""


def test_settings_syntax() -> None:
    assert parse("300") == Every(300)
    assert parse("cron:0 9 * * 1-5@Europe/Madrid") == Cron("0 9 * * 1-5", "Europe/Madrid")
    assert parse("cron:*/5 * * * *") == Cron("*/5 * * * *", "UTC")
    assert str(Cron("0 9 * * 1-5", "Europe/Madrid")) == "cron:0 9 * * 1-5@Europe/Madrid"
    assert parse_overrides(
        "sweep=60, report=cron:0 9,17 * * 1-5@Europe/Madrid,x=cron:0 * * * *"
    ) == {
        "sweep": Every(60),
        "report": Cron("0 9,17 * * 1-5", "Europe/Madrid"),
        "x": Cron("0 * * * *", "UTC"),
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("report=cron:0 25 * * *", "report': cron expression '0 25 * * *': Bad hour"),
        ("report=cron:0 9 * * 1-5@Europe/Madird", "unknown time zone 'Europe/Madird'"),
        ("report=cron:0 9 * *", "must have five fields"),
        ("report=cron:0 0 30 2 *", "report'"),
        ("sweep=0", "sweep': a period must be positive"),
        ("sweep=soon", "expected seconds or cron"),
        ("sweep", "task=seconds"),
    ],
)
def test_bad_overrides_are_start_up_errors_naming_variable_and_task(raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as error:
        Settings.from_env({"CONSUMER_LOCAL_MODE": "true", "CONSUMER_TICK_PERIODS": raw})
    assert "CONSUMER_TICK_PERIODS" in str(error.value) and message in str(error.value)


def test_tolerance_setting_is_range_checked() -> None:
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_TICK_FUTURE_TOLERANCE_SECONDS": "3600"}
    with pytest.raises(SettingsError, match=re.escape("TOLERANCE_SECONDS must be 0..60")):
        Settings.from_env(env)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "0 9 * * 1-5", "timezone": "Mars/Olympus"}, "'report': unknown time zone"),
        ({"cron": "61 * * * *"}, "'report': cron expression '61 * * * *': Bad minute"),
        ({"period_seconds": 0}, "'report': a period must be positive"),
        ({}, "give period_seconds or cron"),
        ({"period_seconds": 60, "cron": "* * * * *"}, "not both"),
    ],
)
def test_bad_registered_schedule_is_a_start_up_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        Registry().tick("report", **kwargs)


def test_registry_keeps_period_and_cron_tasks_and_overrides_win() -> None:
    registry = Registry()
    registry.tick("sweep", 300)(lambda context, event: None)
    registry.tick("report", cron="0 9 * * 1-5", timezone="Europe/Madrid")(lambda c, e: None)
    assert registry.schedule_of("sweep") == Every(300)
    assert registry.schedule_of("report") == Cron("0 9 * * 1-5", "Europe/Madrid")
    assert registry.schedule_of("unknown") == Every(60)
    registry.period_overrides = {"sweep": 10, "report": Cron("0 8 * * *")}
    assert registry.schedule_of("sweep") == Every(10)  # a bare number is seconds
    assert registry.schedule_of("report") == Cron("0 8 * * *", "UTC")


CRONS = st.sampled_from(
    [
        Cron("0 9 * * 1-5", "Europe/Madrid"),
        Cron("30 2 * * *", "Europe/Madrid"),
        Cron("30 * * * *", "America/New_York"),
        Cron("*/5 * * * *", "UTC"),
        Cron("15 1,13 * * 0", "Australia/Lord_Howe"),  # a half-hour daylight saving shift
    ]
)
CLOCK_CHANGES = [
    datetime(2026, month, day, tzinfo=UTC)
    for month, day in ((3, 8), (3, 29), (4, 5), (10, 4), (10, 25), (11, 1))
]  # US and EU spring and fall, Lord Howe's April and October shifts
MOMENTS = st.one_of(
    st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31)).map(
        lambda moment: moment.replace(tzinfo=UTC)
    ),
    st.builds(
        lambda day, seconds: day - timedelta(days=1) + timedelta(seconds=seconds),
        st.sampled_from(CLOCK_CHANGES),
        st.integers(0, 2 * 86400),
    ),
)


@given(cron=CRONS, moment=MOMENTS)
def test_cron_slots_are_fire_times_at_or_before_and_chain_back(
    cron: Cron, moment: datetime
) -> None:
    """Whatever the zone's clock changes: the slot is at or before the moment, is its own slot,
    nothing fires between it and the moment, and the previous fire time chains back to it."""
    slot = cron.slot_of(moment)
    assert slot <= moment and slot.tzinfo is UTC
    assert cron.slot_of(slot) == slot
    assert cron.slot_of(slot - timedelta(microseconds=1)) == cron.previous(slot) < slot
    after = CronSim(cron.expression, slot.astimezone(ZoneInfo(cron.timezone)))
    assert next(after).astimezone(UTC) > moment
