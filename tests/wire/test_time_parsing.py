"""Every site that parses a sender's time, driven with extreme values: each returns a time in
the service's range or refuses the value with its clear error (a 400, a permanent fault, or the
publish time standing in), never ``OverflowError``, ``TypeError`` or any other exception.

Sites: ``parse_rfc3339`` and ``parse_http_date`` themselves, a push envelope's ``publishTime``,
a CloudEvent's ``time``, a jobs-topic message's ``job_run_at``, Cloud Scheduler's
``X-CloudScheduler-ScheduleTime``, a target's ``Retry-After``, the ``ce-time`` a target is
sent, the job API's ``run_at`` (a 400 that stores nothing) and ``consumer jobs enqueue
--run-at`` (exit status 2 naming the option, no traceback, nothing stored)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from consumer.cli.main import main
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.errors import BadRequest, InvalidEnvelope, Permanent
from consumer.http.app import create_app
from consumer.jobs.schema import jobs
from consumer.jobs.topic import new_job
from consumer.service import Service
from consumer.targets.answer import Answer, retry_after
from consumer.targets.cloudevent import for_event
from consumer.ticks.hook import SCHEDULE_TIME_HEADER, scheduled_time
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.events import JobEvent, OtherEvent
from consumer.wire.message import CloudEventMeta, PushMessage
from consumer.wire.timeutil import EARLIEST, LATEST, parse_http_date, parse_rfc3339
from tests.conftest import Clock
from tests.http.job_api_client import SECRET, call

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
REFUSED = [
    "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "99999-12-31T00:00:00Z",
    "275760-09-13T00:00:00Z", "+002026-01-01T00:00:00Z", "NaN", "nan", "Infinity", "-inf", "1e999",
    "2026-01-01T09:00:00", "", "now",
]  # fmt: skip
"""Refused wherever a job's run time is given: out of range, NaN-like, no zone, no time."""
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORED = settings(
    max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
"""Fewer examples where each one may store a job."""
EMAIL = {"to": "ann@example.com", "subject": "Hi", "text": "hello"}


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


@pytest.fixture
def job_api(database_url: str, engine: Engine, tmp_path: Path) -> FlaskClient:
    settings = Settings(database_url=database_url).with_values(
        push_token="push-token-0123456789", job_api_secrets=(SECRET,),
        maildir_path=str(tmp_path / "md"),
    )  # fmt: skip
    return create_app(Service.of(settings, engine), clock=Clock()).test_client()


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(jobs)).scalar_one())


def post_job(job_api: FlaskClient, engine: Engine, run_at: Any) -> None:
    """A job in range, or a 400 naming ``run_at`` that stores nothing."""
    before = stored(engine)
    status, answer = call(
        job_api, "POST", "/jobs", {"kind": "email", "payload": EMAIL, "run_at": run_at}
    )
    if status == 400:
        assert "run_at" in answer["error"] and stored(engine) == before, answer
        return
    assert status == 201, answer
    assert in_range(parse_rfc3339(answer["job"]["run_at"])) and stored(engine) == before + 1


@STORED
@given(RFC3339)
def test_the_job_apis_run_at_is_a_job_in_range_or_a_400(
    job_api: FlaskClient, engine: Engine, text: str
) -> None:
    post_job(job_api, engine, text)


@pytest.mark.parametrize(
    ("run_at", "says"),
    [*((text, "'run_at'") for text in REFUSED), (10**30, "'run_at'"), (["2026"], "'run_at'"),
     (float("nan"), "NaN is not JSON"), (float("inf"), "Infinity is not JSON")],
)  # fmt: skip
def test_the_job_api_refuses_each_extreme_run_at(
    job_api: FlaskClient, engine: Engine, run_at: Any, says: str
) -> None:
    body = {"kind": "email", "payload": EMAIL, "run_at": run_at}
    status, answer = call(job_api, "POST", "/jobs", body)
    assert status == 400 and says in answer["error"] and stored(engine) == 0, answer


@pytest.fixture
def enqueue_at(sqlite_url: str, tmp_path: Path) -> Callable[[str], Result]:
    """``consumer jobs enqueue email --run-at=TEXT`` through click, on a real SQLite file."""
    stray: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONSUMER_")}
    env = {**stray, "CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_MAILDIR_PATH": str(tmp_path / "md")}  # fmt: skip
    command = ["jobs", "enqueue", "email", "--payload", json.dumps(EMAIL)]
    return lambda text: CliRunner(env=env).invoke(main, [*command, f"--run-at={text}"])


def cli_jobs(sqlite_url: str) -> int:
    engine = make_engine(sqlite_url)
    try:
        return stored(engine)
    finally:
        engine.dispose()


@STORED
@given(RFC3339)
def test_the_clis_run_at_is_a_job_in_range_or_exit_status_2(
    enqueue_at: Callable[[str], Result], sqlite_url: str, text: str
) -> None:
    before = cli_jobs(sqlite_url)
    result = enqueue_at(text)
    if result.exit_code == 2:
        assert "--run-at" in result.output and isinstance(result.exception, SystemExit)
        assert cli_jobs(sqlite_url) == before, result.output
        return
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["outcome"] == "enqueued" and cli_jobs(sqlite_url) == before + 1


@pytest.mark.parametrize("text", REFUSED)
def test_the_cli_refuses_each_extreme_run_at(
    enqueue_at: Callable[[str], Result], sqlite_url: str, text: str
) -> None:
    result = enqueue_at(text)
    assert result.exit_code == 2 and "Invalid value for '--run-at'" in result.output, result.output
    assert "Traceback" not in result.output and cli_jobs(sqlite_url) == 0
