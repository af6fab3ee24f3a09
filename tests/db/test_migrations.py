"""Migrations produce the same schema as the models, on both databases."""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings
from typing import Any

from sqlalchemy import Engine, create_engine, inspect
from sqlalchemy.exc import SAWarning

import consumer
from consumer.db.engine import make_engine
from consumer.db.schema import metadata
from consumer.inbox.schema import PARTITIONING
from consumer.jobs.schema import EPOCH_KEYED, EPOCH_PARTITIONS

PARTITIONED = re.compile(rf"{PARTITIONING.pattern}|{EPOCH_PARTITIONS.pattern}")

ENTRY_POINTS = {
    "consumer.http.wsgi",
    "consumer.http.gunicorn_conf",
    "consumer.__main__",
}  # they act on import


def import_every_module() -> None:
    """Feature modules add their tables to the shared metadata when imported."""
    for module in pkgutil.walk_packages(consumer.__path__, "consumer."):
        if ".migrations" not in module.name and module.name not in ENTRY_POINTS:
            importlib.import_module(module.name)


def describe(engine: Engine) -> dict[str, Any]:
    with warnings.catch_warnings():
        # An index on an expression (jobs_claimable) is not reflected on SQLite: both sides
        # lack it alike there; PostgreSQL compares it.
        warnings.filterwarnings("ignore", "Skipped unsupported reflection", SAWarning)
        return _described(engine)


def _described(engine: Engine) -> dict[str, Any]:
    inspector = inspect(engine)
    tables = {}
    for table in inspector.get_table_names():
        if table == "alembic_version" or PARTITIONED.fullmatch(table):
            continue
        tables[table] = {
            "columns": {c["name"]: (str(c["type"]).split("(")[0], c["nullable"])
                        for c in inspector.get_columns(table)},
            "primary_key": sorted(inspector.get_pk_constraint(table)["constrained_columns"]),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(table)
                if not PARTITIONED.fullmatch(i["name"] or "")
            ),
        }  # fmt: skip
    return tables


def by_epoch(jobs: dict[str, Any]) -> dict[str, Any]:
    """The model's jobs table as PostgreSQL partitions it by epoch (``0016_jobs_epochs``): the
    column ``epoch``, no primary key (the unique index on ``(id, epoch)`` stands for it), and the
    epoch after the columns of every other unique index."""
    indexes = [
        (name, (*columns, "epoch") if name in EPOCH_KEYED else columns, unique)
        for name, columns, unique in jobs["indexes"]
    ]
    return {
        "columns": {**jobs["columns"], "epoch": ("INTEGER", False)},
        "primary_key": [],
        "indexes": sorted([*indexes, ("jobs_ids", ("id", "epoch"), True)]),
    }


def test_migrated_schema_matches_the_models(database_url: str, tmp_path: Any) -> None:
    import_every_module()
    migrated = make_engine(database_url)
    if database_url.startswith("sqlite"):
        fresh = create_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    else:
        admin = create_engine(database_url)
        with admin.begin() as connection:
            connection.exec_driver_sql("CREATE SCHEMA fresh")
        admin.dispose()
        fresh = create_engine(database_url, connect_args={"options": "-c search_path=fresh"})
    metadata.create_all(fresh)
    try:
        expected = describe(fresh)
        if not database_url.startswith("sqlite"):
            # Partitioned: no primary key; the unique index on (key, placed_at) stands for it.
            expected["inbox"]["primary_key"] = []
            expected["jobs"] = by_epoch(expected["jobs"])
        assert describe(migrated) == expected
    finally:
        migrated.dispose()
        fresh.dispose()
