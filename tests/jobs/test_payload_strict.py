"""A jobs-topic payload that is not strict JSON (``NaN``, ``Infinity``, ``1e999``) is a bad job,
recorded ``dead`` at once on both databases: PostgreSQL refused to store it, so the message was
retried on every delivery until its attempts ran out."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.outcomes import Kind
from tests.jobs.test_topic import job_message


@pytest.mark.parametrize("number", [b"NaN", b"-Infinity", b"1e999"])
def test_a_payload_with_a_number_no_database_stores_is_dead(
    engine: Engine, settings: Settings, number: bytes
) -> None:
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    payload = b'{"to": "a@example.com", "subject": ' + number + b', "text": "hi"}'
    outcome = dispatcher.dispatch(job_message("m1", payload))
    assert outcome.kind is Kind.DEAD, outcome
    assert "not valid JSON" in outcome.details["error"]
    assert JobStore(engine).list(limit=10) == []
