"""A dashboard served by a real gunicorn process over real seeded data (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from tests.conftest import Server, settings_env
from tests.dashboard.data import PLUGIN, Seeded, seed

TOKEN = "dashboard-admin-token-for-tests"
APP = "consumer.dashboard.wsgi:app()"
DASHBOARD_WORKER = "sync"
"""What ``consumer dashboard`` runs its WSGI app on (``consumer.cli.dashboard``)."""


@dataclass(frozen=True)
class Running:
    server: Server
    engine: Engine
    seeded: Seeded
    switch: Path
    """Create this file to "fix" the deploy handler: dead deploys then replay to done."""


@pytest.fixture
def running_dashboard(
    postgres_url: str,
    start_server: Callable[..., Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Running]:
    monkeypatch.delenv("DASHBOARD_TEST_SWITCH", raising=False)
    monkeypatch.delenv("DASHBOARD_TEST_LATE_TASK", raising=False)
    settings = Settings(database_url=postgres_url, local_mode=True, plugins=(PLUGIN,))
    engine = make_engine(postgres_url)
    seeded = seed(settings, engine)
    switch = tmp_path / "deploys-fixed"
    env = settings_env(
        settings,
        CONSUMER_LOCAL_MODE="false",
        CONSUMER_DASHBOARD_TOKEN=TOKEN,
        DASHBOARD_TEST_SWITCH=str(switch),
        DASHBOARD_TEST_LATE_TASK="1",
    )
    try:
        yield Running(
            start_server(env, workers=2, app=APP, worker=DASHBOARD_WORKER), engine, seeded, switch
        )
    finally:
        engine.dispose()
