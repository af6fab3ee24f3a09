"""The overview's "Job kinds: flow control" table and its actions, through the Flask test client
on SQLite and PostgreSQL: a kind's limits shown, an operator's change stored, in force and
logged with the signed-in identity, a reset, and every bad POST refused with one clear line."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, update

from consumer.config.flow import JobLimit, Rate, parse_job_limits
from consumer.config.settings import Settings
from consumer.dashboard.access import CSRF_COOKIE
from consumer.dashboard.app import create_dashboard
from consumer.jobs import store
from consumer.jobs.flow_admin import FlowAdmin, KindFlow, kinds_flow
from consumer.jobs.model import Status
from consumer.jobs.schema import jobs
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.wire.timeutil import utcnow
from tests.dashboard.conftest import TOKEN
from tests.dashboard.data import PLUGIN

CSRF = "c" * 43
AS_ADMIN = {"Authorization": f"Bearer {TOKEN}"}
Q = "&#39;"
"""A quote as the page escapes it."""


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings.of(
        database_url=database_url, dashboard_token=TOKEN, plugins=(PLUGIN,),
        job_limits=parse_job_limits("report=cap:3;rate:10/1s"),
    )  # fmt: skip


@pytest.fixture
def client(settings: Settings, engine: Engine) -> FlaskClient:
    running = store.enqueue(engine, "report", {}, kinds=["report"]).job_id
    with engine.begin() as conn:  # as a sweeper holds it: running, its lease live
        conn.execute(
            update(jobs)
            .where(jobs.c.id == running)
            .values(status=Status.RUNNING.value, lease_until=utcnow() + timedelta(hours=1))
        )
    client = create_dashboard(Service.of(settings, engine)).test_client()
    client.set_cookie(CSRF_COOKIE, CSRF)
    return client


def _post(client: FlaskClient, action: str, **form: str) -> tuple[int, str]:
    response = client.post(f"/actions/{action}", data={**form, "csrf": CSRF}, headers=AS_ADMIN)
    return response.status_code, response.get_data(as_text=True)


def _report(settings: Settings, engine: Engine) -> KindFlow:
    shown = kinds_flow(FlowAdmin(engine), build_registry(settings), settings, utcnow())
    return shown["report"]


def _row(client: FlaskClient) -> str:
    page = client.get("/", headers=AS_ADMIN).get_data(as_text=True)
    assert "Job kinds: flow control" in page
    return page.split('<tr data-kind="report">', 1)[1].split("</tr>", 1)[0]


def _actions(caplog: pytest.LogCaptureFixture) -> list[tuple[Any, ...]]:
    return [
        (r.who, r.action, r.target, r.ok)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "dashboard action"
    ]


def test_the_overview_shows_each_kinds_limits_and_running_jobs(client: FlaskClient) -> None:
    row = _row(client)
    assert "<td>cap 3, rate 10/1s</td>" in row and "<td>none</td>" in row  # configured, no change
    assert '<td class="num">3</td><td class="num">10/1s</td><td class="num">1</td>' in row
    assert 'action="/actions/limit-kind"' in row and "reset-kind-limit" not in row


def test_a_change_is_stored_in_force_and_logged_with_who_then_reset(
    client: FlaskClient, settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        status, page = _post(client, "limit-kind", kind="report", cap="1", rate="")
        assert status == 200 and "report now runs with cap 1, rate 10/1s (changed: cap:1)" in page
        status, page = _post(client, "limit-kind", kind="report", rate="5/1s")
        assert status == 200 and "(changed: cap:1;rate:5/1s)" in page
    shown = _report(settings, engine)
    assert shown.effective == JobLimit(cap=1, rate=Rate(5, 1.0))
    assert (shown.override, shown.updated_by) == ("cap:1;rate:5/1s", "admin-token")
    assert _actions(caplog) == [("admin-token", "limit-kind", "report", True)] * 2
    changes = [r for r in caplog.records if r.getMessage() == "job kind limits changed"]
    assert [r.by for r in changes] == ["admin-token"] * 2  # type: ignore[attr-defined]
    row = _row(client)
    assert "cap:1;rate:5/1s by admin-token at" in row
    assert '<td class="num">1</td><td class="num">5/1s</td>' in row and "reset-kind-limit" in row

    status, page = _post(client, "limit-kind", kind="report", cap="none")
    assert status == 200 and _report(settings, engine).effective.cap is None
    status, page = _post(client, "reset-kind-limit", kind="report")
    assert status == 200 and "back to its configured limits: cap 3, rate 10/1s" in page
    shown = _report(settings, engine)
    assert shown.override is None and shown.effective == shown.configured


@pytest.mark.parametrize(
    ("action", "form", "status", "message"),
    [
        ("limit-kind", {"kind": "report", "cap": "x"}, 400, f"a whole number, got {Q}x{Q}"),
        ("limit-kind", {"kind": "report", "cap": "4;rate:1/1s"}, 400, "cap must be a whole number"),
        ("limit-kind", {"kind": "report", "rate": "lots"}, 400, "rate must be N/INTERVAL such as"),
        ("limit-kind", {"kind": "report", "cap": "-1"}, 400, "a whole number 0..100000"),
        ("limit-kind", {"kind": "report", "cap": " ", "rate": ""}, 400, "give a cap and/or a rate"),
        ("limit-kind", {"kind": "nope", "cap": "1"}, 404, f"no job kind {Q}nope{Q} is"),
        ("reset-kind-limit", {"kind": "nope"}, 404, f"no job kind {Q}nope{Q} is"),
        ("limit-kind", {"cap": "1"}, 400, "the form has no kind"),
        ("limit-kind", {"kind": "report", "group_cap": "x"}, 400, "group_cap: cap must be a"),
        ("limit-kind", {"kind": "report", "group_rate": "9"}, 400, "group_rate: rate must be N/"),
    ],
)  # fmt: skip
def test_a_bad_change_is_refused_in_one_line_and_stores_nothing(
    client: FlaskClient,
    settings: Settings,
    engine: Engine,
    action: str,
    form: dict[str, str],
    status: int,
    message: str,
) -> None:
    answered, page = _post(client, action, **form)
    assert (answered, message in page) == (status, True), page
    assert _report(settings, engine).override is None


def test_a_post_without_the_csrf_token_changes_nothing(
    client: FlaskClient, settings: Settings, engine: Engine
) -> None:
    for csrf in ({}, {"csrf": "x" * 43}):
        form = {"kind": "report", "cap": "0", **csrf}
        assert client.post("/actions/limit-kind", data=form, headers=AS_ADMIN).status_code == 403
    FlowAdmin(engine).change("report", {"cap": 1}, "ops", utcnow())
    form = {"kind": "report"}
    assert client.post("/actions/reset-kind-limit", data=form, headers=AS_ADMIN).status_code == 403
    assert _report(settings, engine).override == "cap:1"


def test_a_group_cap_is_set_and_the_busiest_groups_shown(
    client: FlaskClient, settings: Settings, engine: Engine
) -> None:
    for n in range(8):
        store.enqueue(engine, "report", {}, kinds=["report"], group=f"tenant-{n % 7}")
    status, page = _post(client, "limit-kind", kind="report", group_cap="2", group_rate="")
    assert status == 200 and "(changed: group_cap:2)" in page
    assert _report(settings, engine).effective.group_cap == 2
    shown = _report(settings, engine).groups
    assert shown[0] == {"group": "tenant-0", "running": 0, "pending": 2} and len(shown) == 5
    row = _row(client)
    assert "tenant-0 0/2, tenant-1 0/1" in row and "tenant-6" not in row
