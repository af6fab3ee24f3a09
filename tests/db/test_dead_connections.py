"""Connections PostgreSQL closed under us (a restart, a failover, an idle timeout): the prepared
claim and finish (on the driver's cursor, consumer.db.prepared, or on libpq, consumer.db.direct)
must still translate the fault and invalidate the dead connection, so the claim is retried on a
new one and the finish is retried until it is recorded. Real PostgreSQL; the backends are ended by
the server itself."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from consumer.config.settings import Settings
from consumer.db.direct import direct
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.prepared import pipelined, prepared
from consumer.errors import Unavailable
from consumer.inbox.model import Status
from consumer.inbox.queries import finish
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent
from tests.wire.test_keys import deploy

pytestmark = pytest.mark.postgres
END_OTHER_BACKENDS = """
    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
"""

FINISH_VALUES = {
    "b_key": "k", "b_token": "t", "b_status": "done", "b_result": None, "b_error": None,
    "b_now": None, "b_refund": 0,
}  # fmt: skip
"""A finish of a row that does not exist: it changes nothing, and fails only on a fault."""


def end_other_backends(postgres_url: str) -> int:
    """End every other session on the test database; how many were ended."""
    conninfo = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(END_OTHER_BACKENDS).fetchone()
    return int(row[0]) if row else 0


def dispatcher(postgres_url: str, engine: Engine, registry: Registry) -> Dispatcher:
    return Dispatcher(Settings(database_url=postgres_url, local_mode=True), engine, registry)


def test_a_claim_on_a_pooled_connection_the_server_ended_is_retried_on_a_new_one(
    postgres_url: str, pg_engine: Engine
) -> None:
    registry = Registry()
    registry.deploy(lambda context, event: {"warmed": event.release}, replace=True)
    service = dispatcher(postgres_url, pg_engine, registry)
    assert service.handle(deploy("shop", "r1"), Source.PUSH).kind == "done"
    assert end_other_backends(postgres_url) >= 1  # the pooled connection is dead now

    outcome = service.handle(deploy("shop", "r2"), Source.PUSH)
    assert outcome.kind == "done", outcome
    row = Inbox(pg_engine).get(outcome.key)
    assert row is not None and (row.status, row.attempts) == (Status.DONE, 1)


def test_a_finish_whose_connection_the_server_ended_is_recorded_on_a_new_one(
    postgres_url: str, pg_engine: Engine
) -> None:
    """The handler ends the delivery's own connection between the claim and the finish: the
    finish fails on it, the connection is invalidated, and the retry records the outcome."""
    registry, ended = Registry(), []

    def handler(context: HandlerContext, event: DeployEvent) -> dict[str, Any]:
        ended.append(end_other_backends(postgres_url))
        return {"warmed": event.release}

    registry.deploy(handler, replace=True)
    outcome = dispatcher(postgres_url, pg_engine, registry).handle(deploy("shop", "r1"))
    assert ended and ended[0] >= 1
    assert outcome.kind == "done", outcome
    row = Inbox(pg_engine).get(outcome.key)
    assert row is not None and (row.status, row.attempts, row.result) == (
        Status.DONE, 1, {"warmed": "r1"},
    )  # fmt: skip


def finish_statement(path: str, engine: Engine) -> Any:
    """The finish on the kept cursor (``prepared``) or straight to libpq (``direct``)."""
    return prepared(finish, engine.dialect) if path == "cursor" else direct(finish, engine.dialect)


@pytest.mark.parametrize("path", ["cursor", "libpq"])
def test_a_dead_connection_is_unavailable_and_a_bad_value_is_not(
    postgres_url: str, pg_engine: Engine, path: str
) -> None:
    """Both faults come out as SQLAlchemy's ``DBAPIError``; only the dead connection is an
    outage (503, redelivered), and only it is invalidated."""
    statement, values = finish_statement(path, pg_engine), FINISH_VALUES
    with pg_engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")
        end_other_backends(postgres_url)
        with pytest.raises(Unavailable), unavailable_on_db_fault():
            statement.rowcount(connection, values)
        assert connection.invalidated
    with pg_engine.connect() as connection:
        with pytest.raises(DBAPIError) as refused, unavailable_on_db_fault():
            statement.rowcount(connection, {**values, "b_error": "nul \x00 byte"})
        assert not refused.value.connection_invalidated and not connection.invalidated


def test_a_pipelined_claim_on_a_connection_the_server_ended_is_unavailable_then_reconnects(
    postgres_url: str, pg_engine: Engine
) -> None:
    """A capped kind's claim and its lock travel in one pipeline (``prepared.pipelined``): the
    fault, surfacing at the pipeline's end, is translated and the connection invalidated, so
    the sweep's retry runs on a new one."""
    with pg_engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")
        connection.commit()
        assert end_other_backends(postgres_url) >= 1
        steps = [(prepared(finish, pg_engine.dialect), FINISH_VALUES, lambda c: c.rowcount)] * 2
        with pytest.raises(Unavailable), unavailable_on_db_fault():
            pipelined(connection, steps)
        assert connection.invalidated
        connection.rollback()
        assert pipelined(connection, steps) == [0, 0]  # reconnected: no such row, no fault
        connection.rollback()


@pytest.mark.parametrize("path", ["cursor", "libpq"])
def test_a_dead_connection_found_by_a_prepared_statement_retires_the_whole_pool(
    postgres_url: str, pg_engine: Engine, path: str
) -> None:
    """After a restart every pooled connection is dead. The first fault retires them all, as
    SQLAlchemy's own statements do: otherwise each would fail one more delivery (a handler's
    write on the second stale connection answered 503 after the claim had reconnected)."""
    first, second = pg_engine.connect(), pg_engine.connect()
    for connection in (first, second):
        connection.exec_driver_sql("SELECT 1")
        connection.commit()
    first.close()
    second.close()  # both are pooled now
    assert end_other_backends(postgres_url) >= 2
    statement = finish_statement(path, pg_engine)
    with pg_engine.connect() as found, pytest.raises(Unavailable), unavailable_on_db_fault():
        statement.rowcount(found, FINISH_VALUES)
    with pg_engine.connect() as one, pg_engine.connect() as other:
        for connection in (one, other):
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
