"""A uniquely named, migrated PostgreSQL database per test or benchmark run, dropped after."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from consumer.db.migrate import upgrade

PG_ADMIN_DSN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextmanager
def migrated_postgres_database(
    admin_dsn: str, prefix: str = "consumer_test", revision: str = "heads"
) -> Iterator[str]:
    """Create a uniquely named database, migrate it (to ``revision``), yield its URL, drop it."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{base}/{name}"
    try:
        upgrade(url, revision)
        yield url
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def conninfo_of(url: str) -> str:
    """psycopg's conninfo for a SQLAlchemy ``postgresql+psycopg://`` URL."""
    return url.replace("postgresql+psycopg://", "postgresql://")
