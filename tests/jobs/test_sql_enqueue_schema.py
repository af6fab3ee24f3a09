"""A database deployed at the five old heads moves through ``0009_one_history`` (which joins
the branches) to the head (the history's shape: tests/migrations), and SQLite gets
``job_kinds`` but no SQL function and no listener (Python's enqueue keeps working there)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect

from consumer import enqueue
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import current_revisions, head_revisions, upgrade
from consumer.jobs import listen
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry

OLD_HEADS = (
    "0003_processed_files",
    "0004_warm_runs",
    "0006_tick_control",
    "0007_job_trace",
    "0008_job_flow_shards",
)


def test_a_database_at_the_old_heads_upgrades_through_the_merge(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'deployed.db'}"
    for head in OLD_HEADS:  # as a database deployed before the merge stands
        upgrade(url, head)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert current_revisions(connection) == frozenset(OLD_HEADS)
        upgrade(url)
        with engine.connect() as connection:
            assert current_revisions(connection) == head_revisions()
    finally:
        engine.dispose()


def test_sqlite_has_the_kinds_table_no_listener_and_python_enqueue_works(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        assert "job_kinds" in inspect(engine).get_table_names()
        settings = Settings(database_url=sqlite_url, local_mode=True)
        assert listen.start(Dispatcher(settings, engine, build_registry(settings))) is None
        assert enqueue(engine, "email", {"to": "a@example.com"}).inserted
    finally:
        engine.dispose()
