"""Run Alembic migrations from code, so ``consumer db upgrade`` needs no alembic.ini on disk."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files("consumer") / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "heads") -> None:
    """Bring the schema up to date. Feature branches of the history each have a head."""
    command.upgrade(alembic_config(database_url), revision)
