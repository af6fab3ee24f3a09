"""Idempotency keys (consumer.wire.events): distinct events never share a key, and events whose
names
contain no escaped character keep exactly the keys a deployed inbox already holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from consumer.wire.events import (
    DeployEvent,
    Event,
    OtherEvent,
    StorageEvent,
    StorageEventType,
    TickEvent,
    escape,
)
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every

WHEN = datetime(2026, 11, 30, 12, 5, tzinfo=UTC)
# Names made mostly of the characters that matter, so collisions would be found if they existed.
names = st.text(alphabet=st.sampled_from(":/#%23AF9a-_. é"), min_size=1, max_size=12)
digits = st.from_regex(r"[0-9]{1,19}", fullmatch=True)
slots = st.integers(0, 10**6).map(lambda minutes: WHEN + timedelta(minutes=minutes))


def message(message_id: str = "1", subscription: str = "projects/p/subscriptions/s") -> PushMessage:
    return PushMessage(message_id, WHEN, subscription=subscription)


def tick(task: str, slot: datetime = WHEN) -> TickEvent:
    return TickEvent(task, slot, Every(300), message())


def storage(bucket: str, name: str, generation: str = "7", **kwargs: str) -> StorageEvent:
    event_type = StorageEventType(kwargs.pop("event_type", "OBJECT_FINALIZE"))
    return StorageEvent(
        event_type, bucket, name, generation, message(kwargs.pop("message_id", "1")), **kwargs
    )


def deploy(service: str, release: str) -> DeployEvent:
    return DeployEvent(service, release, message())


def other(subscription: str, message_id: str) -> OtherEvent:
    return OtherEvent(message(message_id, subscription))


def test_todays_keys_are_unchanged() -> None:
    """Golden keys as the inbox has stored them since the first release."""
    update = StorageEventType.OBJECT_METADATA_UPDATE
    assert tick("sweep").key == "tick:sweep:2026-11-30T12:05:00+00:00"
    assert tick("nightly-report").key == "tick:nightly-report:2026-11-30T12:05:00+00:00"
    assert (
        storage("uploads", "imports/2026/11/a b.csv", "1732960000000000").key
        == "storage:uploads/imports/2026/11/a b.csv#1732960000000000:OBJECT_FINALIZE"
    )
    assert (
        storage("my_bucket.example", "logs/12:00:00.csv", event_type="OBJECT_DELETE").key
        == "storage:my_bucket.example/logs/12:00:00.csv#7:OBJECT_DELETE"
    )
    assert (
        storage("b", "o", event_type=update, metageneration="3").key
        == "storage:b/o#7:OBJECT_METADATA_UPDATE:3"
    )
    assert (
        storage("b", "o", event_type=update, message_id="99").key
        == "storage:b/o#7:OBJECT_METADATA_UPDATE:message-99"
    )
    assert deploy("web", "v1.2.3").key == "deploy:web:v1.2.3"
    assert deploy("web", "2026-11-30T12:00:00Z:abc").key == "deploy:web:2026-11-30T12:00:00Z:abc"
    assert other("projects/p/subscriptions/s", "42").key == "message:projects/p/subscriptions/s:42"
    assert OtherEvent(message("42", "")).key == "message:unknown-subscription:42"


def test_the_issues_deploy_collision_is_gone() -> None:
    """Service ``a:b`` release ``c`` and service ``a`` release ``b:c`` shared ``deploy:a:b:c``."""
    assert deploy("a:b", "c").key == "deploy:a%3Ab:c"
    assert deploy("a", "b:c").key == "deploy:a:b:c"
    assert storage("a/b", "c").key != storage("a", "b/c").key
    assert storage("b", "x#1:OBJECT_FINALIZE", "2").key != storage("b", "x", "1").key
    assert tick("a:2026").key != tick("a").key
    assert deploy("50%3Ab", "c").key != deploy("50:b", "c").key  # the escape itself is escaped


def test_escape_leaves_plain_names_alone() -> None:
    assert escape("imports/a.csv", "#") == "imports/a.csv"
    assert escape("a%b#c", "#") == "a%25b%23c"
    assert escape("a:b", ":") == "a%3Ab"


def parse(key: str) -> tuple[str, ...]:
    """Split a key back into its components: possible only if keys are injective."""
    route, rest = key.split(":", 1)
    if route == "storage":
        bucket, rest = rest.split("/", 1)
        name, rest = rest.split("#", 1)
        generation, rest = rest.split(":", 1)
        return (route, unquote(bucket), unquote(name), unquote(generation), *rest.split(":", 1))
    first, last = rest.split(":", 1)
    return (route, unquote(first), last)


@given(task=names, slot=slots)
def test_tick_keys_split_back_into_task_and_slot(task: str, slot: datetime) -> None:
    assert parse(tick(task, slot).key) == ("tick", task, slot.isoformat())


@given(service=names, release=names)
def test_deploy_keys_split_back_into_service_and_release(service: str, release: str) -> None:
    assert parse(deploy(service, release).key) == ("deploy", service, release)


@given(subscription=names, message_id=names)
def test_message_keys_split_back(subscription: str, message_id: str) -> None:
    assert parse(other(subscription, message_id).key) == ("message", subscription, message_id)


@given(
    bucket=names,
    name=names,
    generation=digits,
    event_type=st.sampled_from(StorageEventType),
    metageneration=st.one_of(st.just(""), digits),
    message_id=names,
)
def test_storage_keys_split_back_into_their_components(
    bucket: str,
    name: str,
    generation: str,
    event_type: StorageEventType,
    metageneration: str,
    message_id: str,
) -> None:
    event = StorageEvent(event_type, bucket, name, generation, message(message_id),
                         metageneration=metageneration)  # fmt: skip
    parts = parse(event.key)
    assert parts[:5] == ("storage", bucket, name, generation, event_type.value)
    if event_type is StorageEventType.OBJECT_METADATA_UPDATE:
        assert parts[5:] == (metageneration or f"message-{message_id}",)
    else:
        assert parts[5:] == ()


@given(st.lists(st.tuples(names, names), min_size=2, max_size=8, unique=True))
def test_distinct_events_never_share_a_key(pairs: list[tuple[str, str]]) -> None:
    events: list[Event] = []
    for first, second in pairs:
        events += [deploy(first, second), storage(first, second), other(first, second)]
    assert len({event.key for event in events}) == len(events)
