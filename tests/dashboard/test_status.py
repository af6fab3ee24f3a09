"""``consumer status`` in a real subprocess: the overview on one terminal screen."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.flow_admin import FlowAdmin
from consumer.wire.timeutil import utcnow
from tests.dashboard.data import PLUGIN, seed

SCREEN_LINES = 40


@pytest.mark.slow
def test_status_prints_the_overview(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASHBOARD_TEST_SWITCH", raising=False)
    settings = Settings(database_url=database_url, local_mode=True, plugins=(PLUGIN,))
    engine = make_engine(database_url)
    try:
        seed(settings, engine)
    finally:
        engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    env.update(CONSUMER_DATABASE_URL=database_url, CONSUMER_PLUGINS=PLUGIN,
               CONSUMER_JOB_LIMITS="report=cap:3;rate:10/1s")  # fmt: skip
    engine = make_engine(database_url)
    try:
        FlowAdmin(engine).change("report", {"cap": 1}, "ana", utcnow())
    finally:
        engine.dispose()
    result = subprocess.run(
        [sys.executable, "-m", "consumer", "status"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= SCREEN_LINES and max(map(len, lines)) <= 100
    out = result.stdout
    assert "dead events 2   unroutable events 1   dead jobs 2   oldest due job 3m" in out
    report = next(line.split() for line in lines if line.strip().startswith("report"))
    assert report == ["report", "2", "0", "1", "2", "0"]  # pending running done dead cancelled
    assert any(line.split()[:2] == ["sweep", "5m"] for line in lines)
    assert "orders-2026-11-30.csv" in out and "shop r0" in out
    assert any(line.split()[:3] == ["dead", "2", "2"] for line in lines)
    flow = next(line for line in lines if line.startswith("  report") and "cap" in line)
    assert flow.split() == ["report", "cap", "1,", "rate", "10/1s", "0", "cap:1", "by", "ana"]
