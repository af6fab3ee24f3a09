"""Apps for the fuzz tests: one database per module (Hypothesis runs hundreds of examples against
one app), with handlers that only echo, so every generated case exercises our own code paths."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.http.app import create_app
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.service import Service
from tests.conftest import migrated_postgres_database


def echo_registry() -> Registry:
    registry = Registry()

    def echo(context: HandlerContext, event: Any) -> dict[str, Any]:
        return {"handled": event.key[:40]}

    for task, period in (("sweep", 60), ("weekly", 7 * 86400), ("odd", 7)):
        registry.tick(task, period)(echo)
    registry.storage(echo)
    registry.deploy(echo)
    return registry


@pytest.fixture(scope="module")
def fuzz_sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'consumer.db'}"
    upgrade(url)
    return url


@pytest.fixture(scope="module")
def fuzz_postgres_url(postgres_admin: str) -> Iterator[str]:
    with migrated_postgres_database(postgres_admin, prefix="consumer_fuzz") as url:
        yield url


@contextmanager
def fuzz_app(database_url: str, **changes: Any) -> Iterator[Flask]:
    """The app on its own engine, disposed of before the database is dropped."""
    settings = Settings.of(
        database_url=database_url,
        local_mode=True,
        max_body_bytes=256 * 1024,
        max_attributes=100,
        max_json_depth=16,
        **changes,
    )
    engine = make_engine(database_url)
    try:
        yield create_app(Service(settings, echo_registry(), engine))
    finally:
        engine.dispose()
