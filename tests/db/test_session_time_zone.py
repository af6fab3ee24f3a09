"""Every PostgreSQL session of ``make_engine`` runs in UTC and under READ COMMITTED, whatever the
server's defaults: the driver reads timestamps as UTC datetimes, which the sweep's claim takes as
they are, and the inbox claim's lookup needs a fresh snapshot per statement. A URL's own
``options`` are kept beside them, and so are the server's timeouts."""

from __future__ import annotations

from datetime import UTC, timedelta

import psycopg
import pytest
from sqlalchemy import make_url, text

from consumer.config.database import DatabaseWaits
from consumer.db.engine import make_engine, session_options
from consumer.inbox.store import Inbox
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow

pytestmark = pytest.mark.postgres


def test_a_session_reads_timestamps_in_utc(postgres_url: str) -> None:
    engine = make_engine(f"{postgres_url}?options=-c%20work_mem%3D5MB")
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SHOW TimeZone")).scalar() == "UTC"
            assert connection.execute(text("SHOW work_mem")).scalar() == "5MB"
            driver = connection.connection.dbapi_connection
            assert driver is not None
            (moment,) = driver.execute("SELECT now()").fetchone()
            assert moment.tzinfo is UTC
    finally:
        engine.dispose()


def test_the_url_s_options_come_first_then_the_zone_and_the_timeouts() -> None:
    waits = DatabaseWaits(statement=1, lock=2, idle_in_transaction=3, pool=4, lease_join=5)
    options = session_options("postgresql+psycopg://h/db?options=-c%20search_path%3Dx", waits)
    assert options == (
        "-c search_path=x -c TimeZone=UTC -c default_transaction_isolation=read\\ committed"
        " -c statement_timeout=1000 -c lock_timeout=2000"
        " -c idle_in_transaction_session_timeout=3000"
    )
    assert session_options("postgresql+psycopg://h/db", None) == (
        "-c TimeZone=UTC -c default_transaction_isolation=read\\ committed"
    )


def test_a_database_defaulting_to_repeatable_read_still_gets_read_committed_sessions(
    postgres_admin: str, postgres_url: str
) -> None:
    """The claim refuses to run under REPEATABLE READ (every push would answer 503); a
    database set to it by its operator does not reach the consumer's sessions."""
    name = make_url(postgres_url).database
    with psycopg.connect(postgres_admin, autocommit=True) as admin:
        setting = "default_transaction_isolation TO 'repeatable read'"
        admin.execute(f"ALTER DATABASE {name} SET {setting}")
    plain = make_url(postgres_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(plain) as other_client:
        level = other_client.execute("SHOW transaction_isolation").fetchone()
        assert level == ("repeatable read",)
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as connection:
            level = connection.execute(text("SHOW transaction_isolation")).scalar()
            assert level == "read committed"
        message = PushMessage(message_id="m", publish_time=utcnow(), data=b"{}")
        claim = Inbox(engine).claim("k", "job", message, utcnow(), timedelta(seconds=60))
        assert claim is not None
    finally:
        engine.dispose()
