"""The inbox as a store: given the caller's ``connection``, its writes join the caller's
transaction and roll back with it; without one they commit on their own. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.ticks.store import TickStore
from consumer.wire.message import PushMessage
from tests.conftest import Rollback

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
LEASE = timedelta(seconds=30)
MESSAGE = PushMessage(message_id="1", publish_time=NOW, data=b"{}")


def dead_row(inbox: Inbox, key: str) -> None:
    claim = inbox.claim(key, "deploy", MESSAGE, NOW, LEASE)
    assert claim is not None and inbox.finish(claim, Status.DEAD, NOW, error="gave up")


def test_claim_finish_and_slot_join_the_callers_transaction(engine: Engine) -> None:
    inbox, ticks = Inbox(engine), TickStore(engine)
    with pytest.raises(Rollback), engine.begin() as connection:
        claim = inbox.claim("k", "deploy", MESSAGE, NOW, LEASE, connection=connection)
        assert claim is not None
        assert inbox.finish(claim, Status.DONE, NOW, {"ok": 1}, connection=connection)
        assert inbox.finished_as(claim, Status.DONE, connection=connection)
        ticks.advance_slot("sweep", NOW, "300", connection=connection)
        row = inbox.get("k", connection=connection)  # the caller sees its own writes
        assert row is not None and row.status is Status.DONE and row.result == {"ok": 1}
        assert ticks.last_slot("sweep", connection=connection) == NOW
        raise Rollback
    assert inbox.get("k") is None and ticks.last_slot("sweep") is None and inbox.list() == []
    ticks.advance_slot("sweep", NOW, "300")  # without a connection: its own transaction, committed
    assert ticks.last_slot("sweep") == NOW


def test_rearm_and_purge_roll_back_with_the_caller(engine: Engine) -> None:
    inbox = Inbox(engine)
    dead_row(inbox, "k")
    with pytest.raises(Rollback), engine.begin() as connection:
        assert inbox.rearm("k", NOW, connection=connection)
        listed = inbox.list(Status.FAILED, connection=connection)
        assert [row.key for row in listed] == ["k"]
        assert inbox.purge(NOW + timedelta(days=1), limit=10, connection=connection) == 1
        assert inbox.get("k", connection=connection) is None
        raise Rollback
    row = inbox.get("k")
    assert row is not None and row.status is Status.DEAD and row.attempts == 1


def test_a_bound_inbox_still_joins_a_connection_it_is_given(engine: Engine) -> None:
    """``on`` binds a checkout for a delivery; ``connection=`` still means the caller's."""
    with engine.connect() as checkout, engine.connect() as caller:
        bound = Inbox(engine).on(checkout)
        with pytest.raises(Rollback), caller.begin():
            assert bound.claim("k", "deploy", MESSAGE, NOW, LEASE, connection=caller)
            raise Rollback
        assert bound.get("k") is None
        assert bound.claim("k", "deploy", MESSAGE, NOW, LEASE) is not None  # own, committed
    assert Inbox(engine).get("k") is not None


def test_the_finish_stamps_finished_at_for_final_statuses_only(engine: Engine) -> None:
    """The finish derives ``finished_at`` from the status it writes: a failed attempt leaves the
    column as it was, a final status stamps its own time (purge and the dashboard read it)."""
    inbox, later = Inbox(engine), NOW + timedelta(minutes=5)
    first = inbox.claim("k", "deploy", MESSAGE, NOW, LEASE)
    assert first is not None and inbox.finish(first, Status.FAILED, NOW, error="blip")
    failed = inbox.get("k")
    assert failed is not None and failed.status is Status.FAILED and failed.finished_at is None
    second = inbox.claim("k", "deploy", MESSAGE, later, LEASE)
    assert second is not None and second.attempts == 2
    assert inbox.finish(second, Status.DONE, later, {"ok": 1})
    done = inbox.get("k")
    assert done is not None and done.status is Status.DONE and done.finished_at == later
    assert done.created_at == NOW and done.updated_at == later and done.lease_until is None
    for status in (Status.DEAD, Status.SKIPPED, Status.UNROUTABLE):
        claim = inbox.claim(status.value, "deploy", MESSAGE, NOW, LEASE)
        assert claim is not None and inbox.finish(claim, status, later)
        row = inbox.get(status.value)
        assert row is not None and row.finished_at == later and row.created_at == NOW
