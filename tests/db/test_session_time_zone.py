"""Every PostgreSQL session of ``make_engine`` runs in UTC, whatever the server's default: the
driver reads timestamps as UTC datetimes, which the sweep's claim takes as they are. A URL's own
``options`` are kept beside it, and so are the server's timeouts."""

from __future__ import annotations

from datetime import UTC

import pytest
from sqlalchemy import text

from consumer.config.database import DatabaseWaits
from consumer.db.engine import make_engine, session_options

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
        "-c search_path=x -c TimeZone=UTC -c statement_timeout=1000 -c lock_timeout=2000"
        " -c idle_in_transaction_session_timeout=3000"
    )
    assert session_options("postgresql+psycopg://h/db", None) == "-c TimeZone=UTC"
