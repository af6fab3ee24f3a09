"""A fresh, migrated database for each act: a SQLite file in the demo's work directory, or a
new database on a PostgreSQL server (created for the act and dropped after it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from consumer.db.migrate import upgrade


@contextmanager
def fresh_database(server: str, workdir: Path, act: str) -> Iterator[str]:
    """``server`` is ``sqlite`` or a PostgreSQL URL whose user may create databases."""
    if server == "sqlite":
        url = f"sqlite:///{workdir / f'{act}.db'}"
        upgrade(url)
        yield url
        return
    admin = make_url(server).set(drivername="postgresql")
    name = f"consumer_demo_{act}_{uuid.uuid4().hex[:8]}"
    admin_dsn = admin.render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    rendered = admin.set(drivername="postgresql+psycopg", database=name).render_as_string(
        hide_password=False
    )
    try:
        upgrade(rendered)
        yield rendered
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
