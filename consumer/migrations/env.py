"""Alembic environment: migrations run once per release (a k8s Job or ``consumer db upgrade``)."""

from __future__ import annotations

from alembic import context

from consumer.db.engine import make_engine

config = context.config


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as connection:
        context.configure(connection=connection, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
