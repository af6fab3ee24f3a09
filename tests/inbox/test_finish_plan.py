"""The finish on a week's partition, and the heartbeat through the parent, reach their row by the
key however young the week is. A week starts empty and unanalyzed, and the finish prepared then
keeps its generic plan until autovacuum analyzes the week (a minute or more); planned on the
``(status, updated_at)`` index, each finish walked every finished row's dead index entry, and the
database's CPU per push doubled in the push bench. Real PostgreSQL, the finish as the
straight-to-libpq path prepares it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from consumer.inbox import queries
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow

pytestmark = pytest.mark.postgres
LEASE = timedelta(seconds=60)


def test_the_finish_prepared_on_an_empty_week_uses_the_key_index(pg_engine: Engine) -> None:
    with pg_engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")  # as after 5 runs
        inbox, now = Inbox(pg_engine, connection), utcnow()
        for n in range(20):
            message = PushMessage(message_id=f"m{n}", publish_time=now, data=b"{}")
            claim = inbox.claim(f"key-{n}", "job", message, now, LEASE)
            assert claim is not None and claim.stored_in.startswith("inbox_w")  # this week's
            assert inbox.finish(claim, Status.DONE, now)
        name = f"consumer_inbox_finish_{claim.stored_in}"
        [types] = connection.exec_driver_sql(
            f"SELECT parameter_types FROM pg_prepared_statements WHERE name = '{name}'"
        ).one()
        nulls = ", ".join("NULL" for _ in types)
        plan = "\n".join(
            connection.exec_driver_sql(f"EXPLAIN EXECUTE {name}({nulls})").scalars().all()
        )
    assert "key_placed" in plan and "status_updated" not in plan, plan


def test_a_heartbeat_in_a_young_week_uses_the_key_index(pg_engine: Engine) -> None:
    now = utcnow()
    message = PushMessage(message_id="m", publish_time=now, data=b"{}")
    claim = Inbox(pg_engine).claim("beating", "job", message, now, LEASE)
    assert claim is not None and claim.stored_in is not None
    beat = queries.heartbeat(claim, now + LEASE, now)
    sql = str(beat.compile(pg_engine, compile_kwargs={"literal_binds": True}))
    with pg_engine.connect() as connection:
        plan = "\n".join(connection.exec_driver_sql(f"EXPLAIN {sql}").scalars().all())
    assert f"{claim.stored_in}_key_placed" in plan and "status_updated" not in plan, plan
