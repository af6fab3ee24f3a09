"""Every site that parses a sender's time, driven with extreme values: each returns a time in
the service's range or refuses the value with its clear error (a 400, a permanent fault, or the
publish time standing in), never ``OverflowError``, ``TypeError`` or any other exception.

Sites: ``parse_rfc3339`` and ``parse_http_date`` themselves, a push envelope's ``publishTime``,
a CloudEvent's ``time``, a jobs-topic message's ``job_run_at``, Cloud Scheduler's
``X-CloudScheduler-ScheduleTime``, a target's ``Retry-After`` and the ``ce-time`` a target is
sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import BadRequest, InvalidEnvelope, Permanent
from consumer.jobs.topic import new_job
from consumer.targets.answer import Answer, retry_after
from consumer.targets.cloudevent import for_event
from consumer.ticks.hook import SCHEDULE_TIME_HEADER, scheduled_time
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.events import JobEvent, OtherEvent
from consumer.wire.message import CloudEventMeta, PushMessage
from consumer.wire.timeutil import EARLIEST, LATEST, parse_http_date, parse_rfc3339

EXTREMES = [
    "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.999999999-23:59", "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "8999-12-31T23:59:59Z", "1969-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z", "10000-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00",
    "2026-01-01T24:00:00Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00.Z", "", " ", "Z",
]  # fmt: skip
OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
MOMENTS = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=OFFSETS
)
RFC3339 = st.one_of(
    st.sampled_from(EXTREMES),
    MOMENTS.map(lambda moment: moment.isoformat()),
    MOMENTS.map(lambda moment: moment.isoformat().replace("+00:00", "Z") + ""),
    st.text(max_size=40),
)
HTTP_DATES = st.one_of(
    MOMENTS.map(format_datetime),
    st.datetimes(min_value=datetime(1, 1, 1)).map(format_datetime),  # no zone: "-0000"
    st.datetimes(min_value=datetime(1, 1, 1)).map(lambda m: format_datetime(m)[:-6]),  # none
    st.text(max_size=40),
)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def in_range(moment: datetime) -> bool:
    return moment.tzinfo is not None and EARLIEST <= moment < LATEST


@FAST
@given(RFC3339)
def test_parse_rfc3339_returns_a_time_in_range_or_refuses(text: str) -> None:
    try:
        moment = parse_rfc3339(text)
    except ValueError:
        return
    assert in_range(moment) and moment.tzinfo is UTC


@FAST
@given(HTTP_DATES)
def test_parse_http_date_returns_a_time_in_range_or_refuses(text: str) -> None:
    try:
        moment = parse_http_date(text)
    except ValueError:
        return
    assert in_range(moment)


@FAST
@given(HTTP_DATES | st.integers(0, 10**30).map(str))
def test_retry_after_is_seconds_or_none(text: str) -> None:
    wait = retry_after(Answer(503, {"Retry-After": text}, b""))
    assert wait is None or wait >= 0


def test_a_retry_after_date_without_a_zone_is_read_as_utc() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    answer = Answer(503, {"Retry-After": "Thu, 01 Jan 2026 12:00:30"}, b"")
    assert retry_after(answer, now) == 30


@FAST
@given(RFC3339)
def test_a_push_publish_time_is_a_message_or_a_400(text: str) -> None:
    body = {"message": {"messageId": "m1", "publishTime": text, "data": ""}, "subscription": "s"}
    try:
        message = parse_push({}, json.dumps(body).encode())
    except InvalidEnvelope:
        return
    assert in_range(message.publish_time)


@FAST
@given(RFC3339)
def test_a_cloudevent_time_is_a_message_or_a_400(text: str) -> None:
    headers = {"ce-id": "e1", "ce-source": "//storage.googleapis.com/projects/_/buckets/b",
               "ce-type": "google.cloud.storage.object.v1.finalized", "ce-specversion": "1.0",
               "ce-time": text}  # fmt: skip
    try:
        message = parse_push(headers, b'{"bucket": "b", "name": "n", "generation": "1"}')
    except InvalidEnvelope:
        return
    assert in_range(message.publish_time)


@FAST
@given(RFC3339)
def test_a_targets_ce_time_is_the_senders_or_the_publish_time(text: str) -> None:
    publish_time = datetime(2026, 1, 1, tzinfo=UTC)
    meta = CloudEventMeta("e1", "/orders", "com.example.paid", time=text)
    message = PushMessage("m1", publish_time, data=b"{}", cloudevent=meta)
    delivery = for_event(OtherEvent(message), "key")
    assert in_range(delivery.time)
    assert delivery.headers()["ce-time"].endswith("Z")


@FAST
@given(RFC3339)
def test_job_run_at_is_a_time_in_range_or_a_permanent_fault(text: str) -> None:
    attributes = {"job_kind": "email", "job_run_at": text}
    message = PushMessage("m1", datetime(2026, 1, 1, tzinfo=UTC), attributes=attributes)
    event = classify(message, lambda task: 60)
    assert isinstance(event, JobEvent)
    try:
        job = new_job(event, {})
    except Permanent:
        return
    assert job.run_at is not None and in_range(job.run_at)


@FAST
@given(RFC3339)
def test_a_scheduler_schedule_time_is_a_time_in_range_or_a_400(text: str) -> None:
    try:
        moment = scheduled_time({SCHEDULE_TIME_HEADER: text})
    except BadRequest:
        return
    assert moment is None or in_range(moment)


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_the_overflowing_times_of_the_issue_are_refused_at_every_site(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_rfc3339(text)
    with pytest.raises(BadRequest):
        scheduled_time({SCHEDULE_TIME_HEADER: text})
    message = PushMessage("m1", datetime(2026, 1, 1, tzinfo=UTC),
                          attributes={"job_kind": "email", "job_run_at": text})  # fmt: skip
    event = classify(message, lambda task: 60)
    assert isinstance(event, JobEvent)
    with pytest.raises(Permanent, match="job_run_at"):
        new_job(event, {})
