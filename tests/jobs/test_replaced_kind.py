"""A built-in kind replaced by a plugin keeps its producer-field filter unless the new kind
declares its own: a plain function in place of ``email`` must not let a message add a ``bcc``."""

from __future__ import annotations

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.fields import EMAIL_FIELDS, kind, producer_fields
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from tests.jobs.test_topic import HOSTILE, job_message
from tests.plugins import own_email


def test_a_plain_function_in_place_of_email_keeps_emails_fields() -> None:
    registry = Registry()
    own_email.register(registry)
    assert producer_fields(registry.job_kinds, "email") == EMAIL_FIELDS


def test_a_replacement_that_declares_its_fields_gets_them() -> None:
    registry = Registry()
    declared = kind(own_email.send_through_our_provider, ["to", "template"])
    registry.job_kind("email", replace=True)(declared)
    assert producer_fields(registry.job_kinds, "email") == {"to", "template"}


def test_a_message_for_the_replaced_email_cannot_add_recipients(
    engine: Engine, settings: Settings
) -> None:
    settings = settings.with_values(plugins=("tests.plugins.own_email",))
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    outcome = dispatcher.dispatch(job_message("m1", HOSTILE))
    assert outcome.details["ignored_fields"] == ["bcc", "cc", "from", "headers", "reply_to"]
    [job] = JobStore(engine).list(limit=10)
    assert job.payload == {"to": "reader@example.com", "subject": "Hi", "text": "Hello"}
