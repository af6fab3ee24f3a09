"""Alembic environment: migrations run once per release (a k8s Job or ``consumer db upgrade``).

``target_metadata`` is every table the code defines, so ``alembic check`` (``consumer db check``)
can prove the migrations and the models agree.
"""

from __future__ import annotations

import importlib
import warnings

from alembic import context
from sqlalchemy import MetaData
from sqlalchemy.exc import SAWarning

from consumer.db.engine import make_engine
from consumer.db.schema import metadata
from consumer.inbox.schema import PARTITIONING

TABLE_MODULES = (
    "consumer.inbox.schema",
    "consumer.ticks.schema",
    "consumer.jobs.schema",
    "consumer.storage.schema",
    "consumer.deploy.schema",
)
"""The stores' schema modules: each adds its tables to the shared ``metadata`` when imported."""

config = context.config


def in_model(name: str | None, type_: str, parent_names: object) -> bool:
    """What ``alembic check`` compares: everything but the inbox's partitioning."""
    return not (type_ in ("table", "index") and name and PARTITIONING.fullmatch(name))


def all_tables() -> MetaData:
    for module in TABLE_MODULES:
        importlib.import_module(module)
    return metadata


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            render_as_batch=True,
            target_metadata=all_tables(),
            include_name=in_model,
        )
        with context.begin_transaction(), warnings.catch_warnings():
            # ``jobs_claimable`` orders by an expression (``coalesce(fair_at, run_at)``), which
            # SQLAlchemy cannot reflect on SQLite: the check compares the other indexes.
            warnings.filterwarnings("ignore", "Skipped unsupported reflection", SAWarning)
            warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expr")
            context.run_migrations()
    engine.dispose()


run_migrations_online()
