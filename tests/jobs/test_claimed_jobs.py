"""A claim's rows become jobs in one pass (``model.claimed_jobs``): the values land in the fields
``Job(...)`` names, a claim's payloads decode exactly as the driver's loader decodes each, and
timestamps of a session in another zone arrive in UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.jobs.model import Job, NewJob, Status, claimed_jobs
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import utcnow

RUN_AT = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
CREATED = RUN_AT - timedelta(minutes=1)
TURN = RUN_AT + timedelta(seconds=7)
ERRORS = [{"attempt": 1, "at": "2026-01-02T03:04:05+00:00", "error": "boom"}]


def row(payload: Any, zone: timezone = UTC, errors: Any = None) -> tuple[Any, ...]:
    """A claim row (``queries.claimed`` order): every column a value no other column has."""
    return (
        11, "mail", payload, 3, RUN_AT.astimezone(zone), 2, 5, "key-1", CREATED.astimezone(zone),
        errors, "00-trace-span-01", "group-1", TURN.astimezone(zone),
    )  # fmt: skip


def test_each_value_lands_in_the_field_job_names_it() -> None:
    (job,) = claimed_jobs([row('{"to": "a@b"}', errors=ERRORS)], payloads_as_text=True)
    assert job == Job(
        id=11, kind="mail", payload={"to": "a@b"}, status=Status.RUNNING, priority=3,
        run_at=RUN_AT, attempts=2, max_attempts=5, idempotency_key="key-1", created_at=CREATED,
        errors=ERRORS, trace_parent="00-trace-span-01", group_key="group-1", fair_at=TURN,
    )  # fmt: skip
    assert type(job) is Job and len(job) == len(Job._fields)


def test_no_errors_yet_is_an_empty_history() -> None:
    (job,) = claimed_jobs([row("{}")], payloads_as_text=True)
    assert job.errors == ()
    assert job.last_error is None and job.lease_until is None and job.result is None


PAYLOADS = [
    '{"i": 1}', "[1, 2, [3]]", '"a, string ] with } brackets"', "12345678901234567890123",
    "null", "true", "1.5e3", '{"a": {"b": [1, {"c": "\\u00e9\\ud83d\\ude00"}]}}',
    '{"a": 1, "a": 2}', "  {\n \"spaced\" : 1 }  ", '""', "{}",
]  # fmt: skip


def test_a_claims_payloads_decode_as_each_would_alone() -> None:
    jobs = claimed_jobs([row(text) for text in PAYLOADS], payloads_as_text=True)
    assert [job.payload for job in jobs] == [json.loads(text) for text in PAYLOADS]


def test_decoded_payloads_are_taken_as_they_are() -> None:
    payload = {"already": ["decoded"]}
    (job,) = claimed_jobs([row(payload)], payloads_as_text=False)
    assert job.payload is payload


def test_timestamps_of_a_session_in_another_zone_arrive_in_utc() -> None:
    zone = timezone(timedelta(hours=-5))
    (job,) = claimed_jobs([row("{}", zone)], payloads_as_text=True)
    for value, expected in ((job.run_at, RUN_AT), (job.created_at, CREATED), (job.fair_at, TURN)):
        assert value == expected and value.tzinfo is UTC


def test_an_ungrouped_job_has_no_turn() -> None:
    ungrouped = (*row("{}", timezone(timedelta(hours=2)))[:-1], None)
    (job,) = claimed_jobs([ungrouped], payloads_as_text=True)
    assert job.fair_at is None and job.run_at.tzinfo is UTC


def test_no_rows_no_jobs() -> None:
    assert claimed_jobs([], payloads_as_text=True) == []


@pytest.mark.parametrize(
    "payload", [{"n": 12345678901234567890123, "s": "a,b]}"}, [1, None, "x"], "text", 0, None]
)
def test_a_claimed_job_has_the_payload_it_was_enqueued_with(engine: Engine, payload: Any) -> None:
    store = JobStore(engine)
    store.enqueue(NewJob("mail", payload), allow_unknown=True)
    now = utcnow()
    (job,) = store.claim("t1", 10, ["mail"], now, now + timedelta(seconds=30))
    assert job.payload == payload and job.run_at.tzinfo is UTC and job.created_at.tzinfo is UTC
