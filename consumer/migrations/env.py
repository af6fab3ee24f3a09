"""Alembic environment: migrations run once per release (a k8s Job or ``consumer db upgrade``).

``target_metadata`` is every table the code defines, so ``alembic check`` (``consumer db check``)
can prove the migrations and the models agree.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, MutableMapping
from typing import Any

from alembic import context
from sqlalchemy import MetaData
from sqlalchemy.exc import SAWarning

from consumer.db.engine import make_engine
from consumer.db.schema import metadata
from consumer.inbox.schema import PARTITIONING
from consumer.jobs.schema import EPOCH_KEYED, EPOCH_PARTITIONING

TABLE_MODULES = (
    "consumer.inbox.schema",
    "consumer.ticks.schema",
    "consumer.jobs.schema",
    "consumer.storage.schema",
    "consumer.deploy.schema",
)
"""The stores' schema modules: each adds its tables to the shared ``metadata`` when imported."""

config = context.config


def in_model(name: str | None, type_: str, parent_names: MutableMapping[Any, str | None]) -> bool:
    """What ``alembic check`` compares: everything but the inbox's and the jobs' partitioning
    (the jobs' ``epoch`` column is PostgreSQL's only)."""
    if type_ == "column":
        return not (name == "epoch" and parent_names.get("table_name") == "jobs")
    return not (
        type_ in ("table", "index")
        and name
        and (PARTITIONING.fullmatch(name) or EPOCH_PARTITIONING.fullmatch(name))
    )


def compared(dialect: str) -> Callable[[object, str | None, str, bool, object], bool]:
    """On PostgreSQL the jobs' unique indexes carry the epoch (``EPOCH_KEYED``): not compared."""

    def include(item: object, name: str | None, type_: str, reflected: bool, to: object) -> bool:
        return not (dialect == "postgresql" and type_ == "index" and name in EPOCH_KEYED)

    return include


def all_tables() -> MetaData:
    for module in TABLE_MODULES:
        importlib.import_module(module)
    return metadata


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url") or "")
    try:  # a migration that fails (a lock not granted in time) closes its connection too
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                render_as_batch=True,
                target_metadata=all_tables(),
                include_name=in_model,
                include_object=compared(connection.dialect.name),
            )
            with context.begin_transaction(), warnings.catch_warnings():
                # ``jobs_claimable`` orders by an expression (``coalesce(fair_at, run_at)``),
                # which SQLAlchemy cannot reflect on SQLite: the check compares the other indexes.
                warnings.filterwarnings("ignore", "Skipped unsupported reflection", SAWarning)
                warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expr")
                context.run_migrations()
    finally:
        engine.dispose()


run_migrations_online()
