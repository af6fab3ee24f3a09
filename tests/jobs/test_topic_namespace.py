"""Producer keys in their own namespace: a jobs-topic message can neither take a key trusted code
enqueues under nor join (or hold up) a lock key trusted code uses, and a producer's run-at is
bounded (``CONSUMER_PRODUCER_MAX_DELAY_SECONDS``): beyond it the message is ``dead``, and
replayable once it is within reach."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine

from consumer import enqueue
from consumer.config.settings import Settings
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow
from tests.jobs.test_topic import dispatcher, job_message, jobs  # noqa: F401 (a fixture)

MAIL = {"to": "ann@example.com", "subject": "Welcome", "text": "Hello"}


def test_a_producer_cannot_take_a_key_trusted_code_enqueues_under(
    dispatcher: Dispatcher,  # noqa: F811
    engine: Engine,
) -> None:
    forged = {**MAIL, "text": "the publisher's text"}
    outcome = dispatcher.dispatch(job_message("m1", forged, job_key="welcome/ann"))
    trusted = enqueue(engine, "email", MAIL, key="welcome/ann")
    assert trusted.inserted, "trusted code's key was taken by a publisher"
    assert JobStore(engine).get(trusted.job_id).payload == MAIL  # type: ignore[union-attr]
    assert (outcome.kind, outcome.details["job_key"]) == (Kind.DONE, "topic:welcome/ann")


def test_a_producer_cannot_join_a_lock_key_trusted_code_uses(
    dispatcher: Dispatcher,  # noqa: F811
    engine: Engine,
) -> None:
    enqueue(engine, "email", MAIL, key="trusted", lock_key="account-1")
    run_at = (utcnow() + timedelta(days=1)).isoformat()
    dispatcher.dispatch(job_message("m1", MAIL, job_lock_key="account-1", job_run_at=run_at))
    assert sorted(job.lock_key or "" for job in jobs(engine)) == ["account-1", "topic:account-1"]


def test_a_run_at_beyond_the_bound_is_dead_and_replayable_within_it(
    dispatcher: Dispatcher,  # noqa: F811
    engine: Engine,
) -> None:
    for n, far in enumerate(("8999-01-01T00:00:00Z", (utcnow() + timedelta(days=8)).isoformat())):
        message = job_message(f"m{n}", MAIL, job_lock_key="account-1", job_run_at=far)
        outcome = dispatcher.dispatch(message)
        assert (outcome.kind, outcome.http_status) == (Kind.DEAD, 200)
        assert "CONSUMER_PRODUCER_MAX_DELAY_SECONDS" in outcome.details["error"]
    assert jobs(engine) == []
    wider = dispatcher.settings.with_values(producer_max_delay_seconds=10 * 24 * 3600)
    assert replay(Service.of(wider, engine), outcome.key).kind is Kind.DONE
    assert [job.lock_key for job in jobs(engine)] == ["topic:account-1"]


def test_the_bound_is_a_setting_with_a_safe_default() -> None:
    assert Settings().admission.producer_max_delay_seconds == 7 * 24 * 3600
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_PRODUCER_MAX_DELAY_SECONDS": "3600"}
    assert Settings.from_env(env).admission.producer_max_delay_seconds == 3600
