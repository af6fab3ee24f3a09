"""Declaring sources and signing: ``CONSUMER_SOURCES`` parsed and each mistake one line; a server
(or a pull) outside local mode refuses to start without declarations, or without a signing
secret when it publishes continuations or wake-ups; what the service publishes it signs, and
the signature is refused once anything it covers changes."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.admission import sources
from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.jobs import wake
from consumer.pipeline import continuation
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.sources.pull import PullConsumer
from consumer.wire import signed
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow

SECRET = "signing-secret-0123456789"
SERVER = {"CONSUMER_PUSH_TOKEN": "t" * 32, "CONSUMER_SMTP_HOST": "smtp.example.com"}


def test_sources_are_parsed_by_short_name_or_full_path() -> None:
    declared = sources("ticks-push=tick, projects/p/subscriptions/c=tick+storage,(unnamed)=other")
    assert declared == {
        "ticks-push": {"tick"}, "projects/p/subscriptions/c": {"tick", "storage"},
        "(unnamed)": {"other"},
    }  # fmt: skip
    settings = Settings.of(sources=declared)
    assert settings.admission.routes_of("projects/x/subscriptions/ticks-push") == {"tick"}
    assert settings.admission.routes_of("projects/p/subscriptions/c") == {"tick", "storage"}
    assert settings.admission.routes_of("projects/q/subscriptions/c") is None
    assert settings.admission.routes_of("") == {"other"}
    assert sources("none") == {"none": frozenset()}


@pytest.mark.parametrize(
    ("raw", "fault"),
    [
        ("ticks-push", "is not SUBSCRIPTION=ROUTE"),
        ("=tick", "is not SUBSCRIPTION=ROUTE"),
        ("ticks-push=ticks", "unknown route 'ticks'"),
        ("a=tick,a=job", "a is declared twice"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_it(raw: str, fault: str) -> None:
    with pytest.raises(SettingsError, match=fault) as raised:
        Settings.from_env({**SERVER, "CONSUMER_SOURCES": raw})
    assert str(raised.value).startswith("CONSUMER_SOURCES") and "\n" not in str(raised.value)


def test_outside_local_mode_a_server_declares_its_sources() -> None:
    with pytest.raises(SettingsError, match="CONSUMER_SOURCES is not set"):
        Settings.from_env(SERVER)
    assert Settings.from_env({**SERVER, "CONSUMER_SOURCES": "none"}).admission.declared
    assert Settings.from_env(SERVER, serves_push=False)  # the CLI's tools start
    assert not Settings.from_env({"CONSUMER_LOCAL_MODE": "true"}).admission.declared


def test_a_server_that_publishes_continuations_must_sign_them() -> None:
    env = {**SERVER, "CONSUMER_SOURCES": "w=tick", "CONSUMER_WAKE_TOPIC": "projects/p/topics/w"}
    with pytest.raises(SettingsError, match="CONSUMER_SIGNING_SECRETS is not set"):
        Settings.from_env(env)
    with pytest.raises(SettingsError, match="at least 16 characters"):
        Settings.from_env({**env, "CONSUMER_SIGNING_SECRETS": "short"})
    settings = Settings.from_env({**env, "CONSUMER_SIGNING_SECRETS": SECRET})
    assert SECRET not in repr(settings)


def test_a_signature_covers_the_data_and_every_attribute() -> None:
    attributes = signed.sign(b"data", {"task": "sweep", "continuation": "c1"}, SECRET)
    good = PushMessage("m", utcnow(), data=b"data", attributes=attributes)
    assert signed.is_signed(good, ("other-secret-0123456789", SECRET))
    for changed in (
        PushMessage("m", utcnow(), data=b"other", attributes=attributes),
        PushMessage("m", utcnow(), data=b"data", attributes={**attributes, "task": "cleanup"}),
        PushMessage("m", utcnow(), data=b"data", attributes={**attributes, "run_now": "x"}),
    ):
        assert not signed.is_signed(changed, (SECRET,))
    assert not signed.is_signed(good, ())
    assert signed.sign(b"", {"task": "sweep"}, "") == {"task": "sweep"}


class Published:
    """A stand-in for google-cloud-pubsub's client: keeps what is published."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, dict[str, str]]] = []
        self.sent = threading.Event()

    def publish(self, topic: str, data: bytes, **attributes: str) -> Any:
        self.messages.append((topic, data, attributes))
        self.sent.set()
        return self

    def result(self, timeout: float) -> str:
        return "id"


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> Published:
    client = Published()
    monkeypatch.setattr(continuation, "publisher", lambda: client)
    return client


def test_continuations_and_wake_ups_are_signed(
    published: Published, engine: Engine, settings: Settings
) -> None:
    ids = continuation.publish("projects/p/topics/c", {"task": "sweep"}, 2, 5.0, SECRET)
    target = wake.Target("projects/p/topics/w", secret=SECRET)
    wake.Sender(target).request()
    assert published.sent.wait(5)
    for _ in range(50):
        if len(published.messages) == 3:
            break
        threading.Event().wait(0.1)
    assert len(published.messages) == 3 and len(ids) == 2
    for _topic, data, attributes in published.messages:
        message = PushMessage("m", utcnow(), data=data, attributes=attributes)
        assert signed.is_signed(message, (SECRET,)), attributes


def test_a_process_that_cannot_sign_sends_no_wake_up(settings: Settings) -> None:
    declared = settings.with_values(local_mode=False, sources={"w": frozenset({"tick"})},
                                    wake_topic="projects/p/topics/w")  # fmt: skip
    assert wake.Target.of(declared) is None
    assert wake.Target.of(declared.with_values(signing_secrets=(SECRET,))) is not None


def test_a_pull_of_an_undeclared_subscription_does_not_start(
    engine: Engine, settings: Settings
) -> None:
    declared = settings.with_values(local_mode=False, smtp_host="smtp.example.com",
                                    sources={"jobs-pull": frozenset({"job"})})  # fmt: skip
    dispatcher = Dispatcher(declared, engine, build_registry(declared))
    pulled = PullConsumer(dispatcher, "projects/p/subscriptions/other", client=object())  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="does not declare 'projects/p/subscriptions/other'"):
        pulled.run(threading.Event())
