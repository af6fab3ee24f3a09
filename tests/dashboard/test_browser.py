"""The dashboard in a real browser: every page over real HTTP from a real gunicorn, against
PostgreSQL holding data made by the real pipeline; each action clicked, its effect checked in
the database. Screenshots go to ``DASHBOARD_SCREENSHOTS`` (``docs/`` when refreshing them)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from consumer.config.flow import JobLimit
from consumer.inbox.model import Status as EventStatus
from consumer.inbox.store import Inbox
from consumer.jobs.flow_admin import FlowAdmin
from consumer.jobs.model import NewJob
from consumer.jobs.model import Status as JobStatus
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import utcnow
from tests.dashboard.browser import chromium_page
from tests.dashboard.conftest import TOKEN, Running

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("DASHBOARD_SCREENSHOTS") or tmp_path)


def _sign_in(page: Any, url: str) -> None:
    response = page.goto(url + "/")
    assert response.status == 401
    page.fill("input[name=token]", TOKEN)
    page.click("text=Sign in >> nth=-1")
    page.wait_for_selector("h1:has-text('Overview')")


def _result(page: Any) -> str:
    page.wait_for_selector("#result")
    return str(page.inner_text("#result"))


def test_every_page_and_action(running_dashboard: Running, tmp_path: Path) -> None:
    url, seeded = running_dashboard.server.url, running_dashboard.seeded
    with chromium_page(tmp_path / "profile") as page:
        _sign_in(page, url)
        _visit_pages(page, url, running_dashboard, _shots(tmp_path))
        running_dashboard.switch.touch()  # the deploy handler is "fixed": replays now succeed
        _replay_actions(page, url, running_dashboard)
        _job_actions(page, url, running_dashboard)
        _limit_actions(page, url, running_dashboard)
    assert seeded.dead_keys  # the fixture made real dead rows


def _visit_pages(page: Any, url: str, running: Running, shots: Path) -> None:
    seeded = running.seeded
    page.reload()
    body = page.inner_text("main")
    assert "2\ndead events" in body and "1\nunroutable events" in body
    assert "2\ndead jobs" in body and "sweep" in body and "orders-2026-11-30.csv" in body
    page.screenshot(path=str(shots / "dashboard-overview.png"), full_page=True)
    page.goto(url + "/inbox")
    for key in (*seeded.dead_keys, seeded.unroutable_key):
        assert key in page.inner_text("main")
    assert page.locator("button:has-text('Replay all 2 dead deploy events')").count() == 1
    page.screenshot(path=str(shots / "dashboard-inbox.png"), full_page=True)
    page.evaluate("localStorage.setItem('consumer-dashboard-refresh', 'off')")
    page.goto(url + "/inbox?status=dead&route=deploy")
    page.click(f"text={seeded.dead_keys[0]}")
    assert "cannot be warmed yet" in page.inner_text("main")
    assert '"release": "r1"' in page.inner_text("main")
    page.goto(url + "/jobs?status=dead")
    assert page.locator("table tr").count() == 1 + len(seeded.dead_jobs)
    assert page.locator("button:has-text('Retry all 2 dead report jobs')").count() == 1
    page.click(f"a[href='/jobs/{seeded.dead_jobs[0]}']")
    assert "the report template is missing" in page.inner_text("main")
    page.goto(url + "/files")
    assert "partial" in page.inner_text("main")
    assert page.goto(url + "/warm").status == 200
    assert page.goto(url + "/inbox?status=nonsense").status == 400


def _replay_actions(page: Any, url: str, running: Running) -> None:
    inbox, seeded = Inbox(running.engine), running.seeded
    page.goto(url + "/inbox?status=unroutable")
    page.click(f"tr:has-text('{seeded.unroutable_key}') button:has-text('Replay')")
    assert f"replayed {seeded.unroutable_key}: done" in _result(page)
    assert inbox.get(seeded.unroutable_key).status is EventStatus.DONE  # type: ignore[union-attr]
    first, second = seeded.dead_keys
    page.goto(url + "/inbox/event?key=" + requests.utils.quote(first))
    page.click("button:has-text('Replay this event')")
    assert f"replayed {first}: done" in _result(page)
    assert inbox.get(first).status is EventStatus.DONE  # type: ignore[union-attr]
    assert inbox.get(second).status is EventStatus.DEAD  # type: ignore[union-attr]
    page.goto(url + "/inbox")
    page.click("button:has-text('Replay all 1 dead deploy events')")
    assert "replayed 1 dead deploy events: 1 done" in _result(page)
    assert inbox.get(second).status is EventStatus.DONE  # type: ignore[union-attr]
    page.goto(url + "/warm")
    assert "r1" in page.inner_text("main") and "r2" in page.inner_text("main")


def _job_status(running: Running, job_id: int) -> JobStatus:
    job = JobStore(running.engine).get(job_id)
    assert job is not None
    return job.status


def _job_actions(page: Any, url: str, running: Running) -> None:
    seeded = running.seeded
    first, second = seeded.dead_jobs
    page.goto(f"{url}/jobs/{first}")
    page.click("button:has-text('Retry this job')")
    assert f"job {first} is pending again" in _result(page)
    assert _job_status(running, first) is JobStatus.PENDING
    assert _job_status(running, second) is JobStatus.DEAD
    page.goto(url + "/jobs")
    page.click("button:has-text('Retry all 1 dead report jobs')")
    assert "1 dead report jobs are pending again" in _result(page)
    assert _job_status(running, second) is JobStatus.PENDING
    page.goto(url + "/jobs?status=pending")
    page.click(f"tr:has(a[href='/jobs/{seeded.pending_job}']) button:has-text('Cancel')")
    assert f"job {seeded.pending_job} is cancelled" in _result(page)
    assert _job_status(running, seeded.pending_job) is JobStatus.CANCELLED
    assert _job_status(running, seeded.done_job) is JobStatus.DONE
    _cancel_running(page, url, running)


def _cancel_running(page: Any, url: str, running: Running) -> None:
    """A running job's Cancel records the request; what its sweep records after ends it
    cancelled."""
    store = JobStore(running.engine)
    job_id = store.enqueue(NewJob("long-report", {}), allow_unknown=True).job_id
    now = utcnow()
    assert store.claim("browser-claim", 1, ["long-report"], now, now + timedelta(seconds=60))
    page.goto(f"{url}/jobs/{job_id}")
    page.click("button:has-text('Cancel this job')")
    assert f"job {job_id} is running: cancel requested" in _result(page)
    job = store.get(job_id)  # type: ignore[arg-type]
    assert job is not None and job.status is JobStatus.RUNNING and job.cancel_requested_at
    store.complete("browser-claim", utcnow(), done=[job_id])  # type: ignore[list-item]
    assert _job_status(running, job_id) is JobStatus.CANCELLED  # type: ignore[arg-type]


def _set_limit(page: Any, url: str, cap: str) -> str:
    page.goto(url + "/")
    page.fill("tr[data-kind='report'] input[name=cap]", cap)
    page.click("tr[data-kind='report'] button:has-text('set')")
    return _result(page)


def _limit_actions(page: Any, url: str, running: Running) -> None:
    """The kind's cap set from its row of the overview, shown there, and reset."""
    assert "report now runs with cap 2 (changed: cap:2)" in _set_limit(page, url, "2")
    (shown,) = FlowAdmin(running.engine).show({}, ["report"], utcnow())
    assert (shown.effective, shown.updated_by) == (JobLimit(cap=2), "admin-token")
    page.goto(url + "/")
    cells = page.locator("tr[data-kind='report'] td").all_inner_texts()
    kind, configured, change, cap, rate, running_now = cells[:6]
    assert (kind, configured, cap, rate, running_now) == ("report", "no limit", "2", "none", "0")
    assert change.startswith("cap:2 by admin-token at ")
    assert "cap must be a whole number, got 'lots'" in _set_limit(page, url, "lots")
    page.goto(url + "/")
    page.click("tr[data-kind='report'] button:has-text('reset')")
    assert "report is back to its configured limits: no limit" in _result(page)
    assert FlowAdmin(running.engine).show({}, ["report"], utcnow())[0].override is None
    _typing_holds_the_reload(page, url)


def _typing_holds_the_reload(page: Any, url: str) -> None:
    """Auto-refresh (every 10 s) waits while a cap is typed: a reload would lose it."""
    page.evaluate("localStorage.setItem('consumer-dashboard-refresh', 'on')")
    page.goto(url + "/")
    page.fill("tr[data-kind='report'] input[name=cap]", "3")
    page.evaluate("window.notReloaded = true")
    page.wait_for_timeout(11_000)
    assert page.evaluate("window.notReloaded === true")
    assert page.input_value("tr[data-kind='report'] input[name=cap]") == "3"
    page.evaluate("localStorage.setItem('consumer-dashboard-refresh', 'off')")


def test_refuses_the_unauthenticated_and_the_csrf_less(running_dashboard: Running) -> None:
    url, job_id = running_dashboard.server.url, running_dashboard.seeded.pending_job
    assert requests.get(url + "/", timeout=10).status_code == 401
    assert requests.get(url + "/inbox", timeout=10).status_code == 401
    forged = {"job_id": str(job_id), "csrf": "x" * 43}
    cookies = {"consumer_dashboard_csrf": "x" * 43}
    refused = requests.post(url + "/actions/cancel-job", data=forged, cookies=cookies, timeout=10)
    assert refused.status_code == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.get(url + "/jobs", headers=bearer, timeout=10).status_code == 200
    no_csrf = {"job_id": str(job_id)}
    response = requests.post(url + "/actions/cancel-job", data=no_csrf, headers=bearer, timeout=10)
    assert response.status_code == 403 and "CSRF" in response.text
    wrong = {**no_csrf, "csrf": "y" * 43}
    response = requests.post(
        url + "/actions/cancel-job", data=wrong, headers=bearer, cookies=cookies, timeout=10
    )
    assert response.status_code == 403
    assert _job_status(running_dashboard, job_id) is JobStatus.PENDING
    wrong_token = {"Authorization": "Bearer " + "z" * len(TOKEN)}
    assert requests.get(url + "/jobs", headers=wrong_token, timeout=10).status_code == 401
