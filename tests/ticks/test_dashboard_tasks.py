"""The dashboard's tick task buttons in a real Chromium, against a real gunicorn on PostgreSQL:
pause, resume and run now clicked on the overview, each effect checked in the database, each
action's log line naming the signed-in identity; a POST without the CSRF token changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.ticks.pauses import TickControl
from tests.conftest import Server, settings_env
from tests.dashboard.browser import chromium_page
from tests.dashboard.conftest import APP, DASHBOARD_WORKER, TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def dashboard(postgres_url: str, start_server: Callable[..., Server], tmp_path: Path) -> Server:
    settings = Settings(database_url=postgres_url, plugins=("tests.ticks.plugin",))
    env = settings_env(settings, CONSUMER_DASHBOARD_TOKEN=TOKEN, CONSUMER_LOG_LEVEL="INFO")
    output = tmp_path / "dashboard.log"
    return start_server(env, workers=1, app=APP, worker=DASHBOARD_WORKER, output=output)


def _result(page: Any) -> str:
    page.wait_for_selector("#result")
    return str(page.inner_text("#result"))


def _click(page: Any, url: str, task: str, label: str) -> str:
    page.goto(url + "/")
    page.click(f"tr[data-task='{task}'] button:has-text('{label}')")
    return _result(page)


def _actions(server: Server) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in server.text().splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("message") in ("task action", "dashboard action")]


def test_pause_resume_and_run_now_buttons(
    dashboard: Server, postgres_url: str, tmp_path: Path
) -> None:
    engine = make_engine(postgres_url)
    url = dashboard.url
    try:
        with chromium_page(tmp_path / "profile") as page:
            page.goto(url + "/")
            page.fill("input[name=token]", TOKEN)
            page.click("text=Sign in >> nth=-1")
            page.wait_for_selector("h1:has-text('Overview')")
            page.evaluate("localStorage.setItem('consumer-dashboard-refresh', 'off')")

            assert "report is paused" in _click(page, url, "report", "pause")
            pause = TickControl(engine).all_paused()
            assert [(p.task, p.paused_by) for p in pause] == [("report", "admin-token")]
            page.goto(url + "/")
            row = page.inner_text("tr[data-task='report']")
            assert "paused" in row and "by admin-token" in row
            assert "skipped, paused" in _click(page, url, "report", "run now")

            assert "report is resumed" in _click(page, url, "report", "resume")
            assert TickControl(engine).all_paused() == []
            ran = _click(page, url, "report", "run now")
            assert ": done" in ran
        key = ran.split("(", 1)[1].split(")", 1)[0]
        recorded = Inbox(engine).get(key)
        assert key.startswith("tick:report:run-now:")
        assert recorded is not None and recorded.status is Status.DONE
        assert recorded.message["attributes"]["run_by"] == "admin-token"
    finally:
        engine.dispose()
    done = [(a["action"], a["who"]) for a in _actions(dashboard) if a["message"] == "task action"]
    assert done == [
        ("pause", "admin-token"),
        ("run-now", "admin-token"),
        ("resume", "admin-token"),
        ("run-now", "admin-token"),
    ]


def test_a_forged_post_changes_nothing(dashboard: Server, postgres_url: str) -> None:
    forged = {"task": "report", "csrf": "x" * 43}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = requests.post(dashboard.url + "/actions/pause-task", data=forged, headers=headers,
                           timeout=30)  # fmt: skip
    assert answer.status_code == 403
    assert requests.post(dashboard.url + "/actions/run-task", data={"task": "report"},
                         timeout=30).status_code == 403  # fmt: skip
    engine = make_engine(postgres_url)
    try:
        assert TickControl(engine).all_paused() == []
        assert Inbox(engine).list() == []
    finally:
        engine.dispose()
