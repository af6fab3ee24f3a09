"""Run Alembic migrations from code, so ``consumer db upgrade`` needs no alembic.ini on disk, and
tell whether a database is at the head revision (readiness, and the command line's hints)."""

from __future__ import annotations

import functools
from importlib import resources
from weakref import WeakSet

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from consumer.errors import NotMigrated


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files("consumer") / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "heads") -> None:
    """Bring the schema up to date. Feature branches of the history each have a head."""
    command.upgrade(alembic_config(database_url), revision)


@functools.cache
def head_revisions() -> frozenset[str]:
    """The heads of the migration history shipped with this code (read once per process)."""
    return frozenset(ScriptDirectory.from_config(alembic_config("")).get_heads())


def current_revisions(connection: Connection) -> frozenset[str]:
    """The revisions the database says it is at (none: never migrated)."""
    return frozenset(MigrationContext.configure(connection).get_current_heads())


def schema_at_head(engine: Engine, connection: Connection) -> bool:
    """True when the schema is at every head. Remembered per engine once true, so a readiness
    probe costs one ``SELECT 1`` afterwards (a schema only moves forward while we run)."""
    if engine in _AT_HEAD:
        connection.execute(text("SELECT 1"))
        return True
    if current_revisions(connection) != head_revisions():
        return False
    _AT_HEAD.add(engine)
    return True


def require_schema_at_head(engine: Engine, connection: Connection) -> None:
    """Readiness: the database answers and its schema is the one this code was written for;
    otherwise every push would fail with 500s while the pod looked ready."""
    if not schema_at_head(engine, connection):
        raise NotMigrated()


_AT_HEAD: WeakSet[Engine] = WeakSet()
