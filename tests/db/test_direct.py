"""The claim and finish sent straight to libpq (consumer.db.direct), prepared once per server
session: what they write is what the cursor path writes, and a session that lost its prepared
statements (DEALLOCATE, DISCARD, a reconnection, a changed column type) prepares them again
instead of failing a delivery. Real PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sqlalchemy import Connection, Engine

from consumer.db import direct
from consumer.db.engine import make_engine
from consumer.inbox import queries
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage

pytestmark = pytest.mark.postgres
NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
LEASE = timedelta(seconds=30)
MESSAGE = PushMessage(message_id="m1", publish_time=NOW, data=b"{}")


@pytest.fixture
def autocommit(pg_engine: Engine) -> Iterator[Connection]:
    """A connection in autocommit, as a delivery's kept connection is."""
    with pg_engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        yield connection


def prepared_here(connection: Connection) -> set[str]:
    return {name for name in sql(connection, "SELECT name FROM pg_prepared_statements")}


def sql(connection: Connection, statement: str) -> list[str]:
    """``statement`` on the connection, its transaction ended (the bound inbox begins its own),
    and the first column of its rows."""
    with connection.begin():
        result = connection.exec_driver_sql(statement)
        return list(result.scalars()) if result.returns_rows else []


FINISH = "consumer_inbox_finish_inbox_default"
"""The finish of a row placed in a week no partition was made for: a fresh database's weeks start
with the current one (``0015_inbox_partitions``), and ``NOW`` lies before them."""


def claim_and_finish(inbox: Inbox, key: str, result: object = None) -> None:
    claim = inbox.claim(key, "deploy", MESSAGE, NOW, LEASE)
    assert claim is not None and claim.attempts == 1
    assert inbox.finish(claim, Status.DONE, NOW + LEASE, result)


def test_a_bound_autocommit_inbox_prepares_once_and_writes_what_a_transaction_writes(
    pg_engine: Engine, autocommit: Connection
) -> None:
    """The direct path (bound, autocommit) against the cursor path (a transaction of its own):
    same rows, JSON ``null`` for no result included."""
    fast, slow = Inbox(pg_engine, autocommit), Inbox(pg_engine)
    assert fast._direct_claim is not None  # PostgreSQL: the claim goes straight to libpq
    for n, result in enumerate([None, {"warmed": "r1"}, None]):
        claim_and_finish(fast, f"fast-{n}", result)
        claim_and_finish(slow, f"slow-{n}", result)
    assert prepared_here(autocommit) == {"consumer_inbox_claim", FINISH}
    for n in range(3):
        written, expected = fast.get(f"fast-{n}"), slow.get(f"slow-{n}")
        assert written is not None and expected is not None
        assert written.__dict__ | {"key": "k"} == expected.__dict__ | {"key": "k"}
    nulls = "SELECT key FROM inbox WHERE result::text = 'null' ORDER BY key"
    assert sql(autocommit, nulls) == ["fast-0", "fast-2", "slow-0", "slow-2"]  # not SQL NULL
    claim = fast.claim("fast-1", "deploy", MESSAGE, NOW, LEASE)
    assert claim is None  # finished: the claim returns no row
    held = slow.claim("held", "deploy", MESSAGE, NOW, LEASE)
    assert held is not None
    assert not fast.finish(replace(held, token="not-the-token"), Status.DONE, NOW)
    assert fast.finish(held, Status.DONE, NOW)


@pytest.mark.parametrize("forget", ["DEALLOCATE ALL", "DISCARD ALL", "DEALLOCATE"])
def test_a_session_that_lost_its_statements_prepares_them_again(
    pg_engine: Engine, autocommit: Connection, forget: str
) -> None:
    inbox = Inbox(pg_engine, autocommit)
    claim_and_finish(inbox, "before")
    if forget == "DEALLOCATE":
        sql(autocommit, f"DEALLOCATE {FINISH}")
    else:
        sql(autocommit, forget)
    assert prepared_here(autocommit) <= {"consumer_inbox_claim"}
    claim_and_finish(inbox, "after")
    assert prepared_here(autocommit) == {"consumer_inbox_claim", FINISH}


def test_another_sessions_deallocate_leaves_this_ones_statements(
    pg_engine: Engine, autocommit: Connection, postgres_url: str
) -> None:
    inbox = Inbox(pg_engine, autocommit)
    claim_and_finish(inbox, "before")
    conninfo = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as other:
        other.execute("DEALLOCATE ALL")
    claim_and_finish(inbox, "after")


def test_a_reconnected_connection_prepares_again(pg_engine: Engine, autocommit: Connection) -> None:
    inbox = Inbox(pg_engine, autocommit)
    claim_and_finish(inbox, "before")
    before = autocommit.connection.dbapi_connection
    autocommit.invalidate()
    autocommit.execution_options(isolation_level="AUTOCOMMIT")
    claim_and_finish(inbox, "after")
    assert autocommit.connection.dbapi_connection is not before
    assert prepared_here(autocommit) == {"consumer_inbox_claim", FINISH}


def test_a_changed_result_type_prepares_again(pg_engine: Engine, autocommit: Connection) -> None:
    """The claim returns ``attempts``: a migration that widens it (the column, and the claim
    function's result with it) changes the prepared statement's result type, which PostgreSQL
    refuses to run; the run prepares it again."""
    inbox = Inbox(pg_engine, autocommit)
    claim_and_finish(inbox, "before")
    [definition] = sql(autocommit, "SELECT pg_get_functiondef('consumer_inbox_claim'::regproc)")
    assert "attempts integer" in definition
    sql(autocommit, "ALTER TABLE inbox ALTER COLUMN attempts TYPE bigint")
    sql(autocommit, "DROP FUNCTION consumer_inbox_claim")
    sql(autocommit, definition.replace("attempts integer", "attempts bigint"))
    claim_and_finish(inbox, "after")


def test_sqlite_has_no_direct_statements(sqlite_url: str) -> None:
    assert direct.direct(queries.claim, make_engine(sqlite_url).dialect) is None


THROUGH_A_PROXY = """
import sys
from datetime import UTC, datetime, timedelta
from bench.support.tcpproxy import TcpProxy
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage

url = sys.argv[1]
proxy = TcpProxy(5432)
proxy.start()
engine = make_engine(url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}"))
now = datetime(2026, 1, 1, 12, tzinfo=UTC)
with engine.connect() as connection:
    connection.execution_options(isolation_level="AUTOCOMMIT")
    inbox = Inbox(engine, connection)
    claim = inbox.claim("k", "deploy", PushMessage("m1", now, b"{}"), now, timedelta(seconds=30))
    assert claim is not None and inbox.finish(claim, Status.DONE, now, None)
print("claimed and finished")
"""


def test_preparing_leaves_the_processs_other_threads_running(postgres_url: str) -> None:
    """The first run prepares and describes its statement while other threads go on: here the
    TCP proxy, in the same process, that must forward the server's answer. Describing with
    psycopg's ``describe_prepared`` held the GIL while libpq waited, and the claim never came
    back (in a subprocess, so a stall ends at the timeout instead of stalling the tests)."""
    if "@127.0.0.1:5432/" not in postgres_url:
        pytest.skip("the proxy forwards to 127.0.0.1:5432")
    done = subprocess.run(
        [sys.executable, "-c", THROUGH_A_PROXY, postgres_url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "claimed and finished" in done.stdout
