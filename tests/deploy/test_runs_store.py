"""``WarmRuns`` as a store: given the caller's ``connection``, a recorded run joins the caller's
transaction and rolls back with it; without one it commits. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.store import WarmRuns
from consumer.wire.events import DeployEvent
from consumer.wire.message import PushMessage
from tests.conftest import Rollback

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
EVENT = DeployEvent("web", "v1", PushMessage(message_id="1", publish_time=NOW), "prod")
REPORT = WarmReport("http", (TargetResult("https://web.example/", True, 0.1, status=200),))


def test_a_run_recorded_on_the_callers_connection_rolls_back_with_it(engine: Engine) -> None:
    runs = WarmRuns(engine)
    with pytest.raises(Rollback), engine.begin() as connection:
        runs.record(EVENT, 1, NOW, REPORT, connection=connection)
        seen = runs.for_key(EVENT.key, connection=connection)  # the caller sees its own write
        assert [(run.warmer, run.targets_ok) for run in seen] == [("http", 1)]
        assert len(runs.recent(connection=connection)) == 1
        raise Rollback
    assert runs.for_key(EVENT.key) == [] and runs.recent() == []
    runs.record(EVENT, 2, NOW, REPORT)  # without a connection: its own transaction, committed
    assert [run.attempt for run in runs.recent()] == [2]
