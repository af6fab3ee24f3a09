"""The cleanup task purges what nobody will ever finish: rows past their retention, including
``running`` rows left by a delivery that died and whose message never came back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from consumer.dispatch import Dispatcher
from consumer.envelope import parse_push
from consumer.envelopes_out import deploy_body, tick_body
from consumer.inbox import Inbox, Status
from consumer.plugins import build_registry
from consumer.settings import Settings


def claim(engine: Engine, release: str, leased_at: datetime) -> str:
    message = parse_push({}, json.dumps(deploy_body("web", release)).encode())
    key = f"deploy:web:{release}"
    assert Inbox(engine).claim(key, "deploy", message, leased_at, timedelta(minutes=1))
    return key


def test_running_rows_whose_lease_ended_over_the_retention_ago_are_purged(
    engine: Engine, settings: Settings
) -> None:
    now = datetime.now(UTC)
    retention = timedelta(seconds=settings.inbox.retention_seconds)
    abandoned = claim(engine, "abandoned", now - retention - timedelta(hours=1))
    recent = claim(engine, "expired-recently", now - timedelta(hours=1))
    live = claim(engine, "live", now)
    outcome = Dispatcher(settings, engine, build_registry(settings)).dispatch(
        parse_push({}, json.dumps(tick_body("cleanup")).encode())
    )
    assert (outcome.kind.value, outcome.details["inbox_purged"]) == ("done", 1)
    inbox = Inbox(engine)
    assert inbox.get(abandoned) is None
    for key in (recent, live):
        row = inbox.get(key)
        assert row is not None and row.status is Status.RUNNING
