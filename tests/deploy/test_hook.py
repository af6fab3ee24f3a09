"""``POST /hooks/deploy`` through the Flask app on a real database: a signed hook joins the inbox
flow; anything unsigned, mis-signed, stale or malformed is refused and nothing runs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from bench.support.deploy_targets import TargetServer
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.deploy.hook import HOOK_MAX_BYTES
from consumer.deploy.schema import warm_runs
from consumer.http.app import create_app
from consumer.inbox.store import Inbox
from consumer.service import Service
from consumer.wire.envelopes_out import deploy_body
from tests.deploy.conftest import OLD_SECRET, SECRET

BODY = {"service": "web", "release": "v1.4.2", "environment": "production", "commit": "abc123"}


@pytest.fixture
def urls(targets: TargetServer) -> list[str]:
    return targets.urls("ok", 10)


@pytest.fixture
def app_settings(settings: Settings, urls: list[str]) -> Settings:
    return Settings.of(
        database_url=settings.database_url, local_mode=True, warm_targets=tuple(urls),
        deploy_hook_secrets=(SECRET, OLD_SECRET), deploy_hook_tolerance_seconds=300,
    )  # fmt: skip


def hook(
    client: FlaskClient,
    body: Any = BODY,
    secret: str = SECRET,
    skew: int = 0,
    **header_changes: str | None,
) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers: dict[str, str | None] = {**signed_headers(secret, int(time.time()) + skew, raw)}
    headers.update({k.replace("_", "-"): v for k, v in header_changes.items()})
    sent = {k: v for k, v in headers.items() if v is not None}
    response = client.post("/hooks/deploy", data=raw, headers=sent)
    return response.status_code, response.json or {}


def nothing_ran(engine: Engine, targets: TargetServer, urls: list[str]) -> bool:
    with engine.connect() as connection:
        runs = connection.execute(select(func.count()).select_from(warm_runs)).scalar()
    return runs == 0 and not Inbox(engine).list() and sum(targets.hits_of(urls)) == 0


def test_a_signed_hook_warms_once_and_a_retry_is_a_duplicate(
    client: FlaskClient, targets: TargetServer, urls: list[str]
) -> None:
    status, body = hook(client)
    assert (status, body["outcome"], body["key"]) == (200, "done", "deploy:web:v1.4.2")
    assert body["warmers"][0]["ok"] == 10 and body["environment"] == "production"
    status, body = hook(client)  # the CI pipeline retries its hook
    assert (status, body["outcome"]) == (200, "duplicate")
    assert targets.hits_of(urls) == [1] * 10


def test_the_hook_and_a_pubsub_deploy_share_one_key(
    client: FlaskClient, engine: Engine, targets: TargetServer, urls: list[str]
) -> None:
    assert hook(client)[1]["outcome"] == "done"
    response = client.post("/push", json=deploy_body("web", "v1.4.2"))
    assert (response.status_code, (response.json or {})["outcome"]) == (200, "duplicate")
    assert targets.hits_of(urls) == [1] * 10
    row = Inbox(engine).get("deploy:web:v1.4.2")
    assert row is not None and row.message["format"] == "deploy-hook"


def test_the_previous_secret_is_accepted_during_a_rotation(client: FlaskClient) -> None:
    assert hook(client, secret=OLD_SECRET)[0] == 200


def test_version_is_accepted_for_release(client: FlaskClient) -> None:
    status, body = hook(client, body={"service": "web", "version": "2026.11.29"})
    assert (status, body["key"]) == (200, "deploy:web:2026.11.29")


def test_a_task_field_does_not_turn_a_hook_into_a_tick(client: FlaskClient) -> None:
    status, body = hook(client, body={**BODY, "task": "sweep"})
    assert (status, body["key"]) == (200, "deploy:web:v1.4.2")


REFUSALS = {
    "bad signature": {"X-Consumer-Signature": "v1=" + "0" * 64},
    "stale timestamp": {"skew": -301},
    "future timestamp": {"skew": 301},
    "missing timestamp": {TIMESTAMP_HEADER: None},
    "missing signature": {SIGNATURE_HEADER: None},
    "unknown secret": {"secret": "an-unknown-secret-0123456789"},
    "malformed timestamp": {TIMESTAMP_HEADER: "yesterday"},
    "superscript digit timestamp": {TIMESTAMP_HEADER: "\u00b2"},
    "superscript digits timestamp": {TIMESTAMP_HEADER: "\u00b9\u00b2\u00b3"},
}


@pytest.mark.parametrize("change", REFUSALS.values(), ids=REFUSALS.keys())
def test_unauthenticated_hooks_are_401_and_nothing_runs(
    client: FlaskClient,
    engine: Engine,
    targets: TargetServer,
    urls: list[str],
    change: dict[str, Any],
) -> None:
    options = {k: v for k, v in change.items() if k in ("skew", "secret")}
    headers = {k: v for k, v in change.items() if k not in options}
    status, body = hook(client, **options, **headers)
    assert (status, body["outcome"]) == (401, "rejected")
    assert nothing_ran(engine, targets, urls)


def test_a_hook_without_configured_secrets_is_401(
    settings: Settings, engine: Engine, targets: TargetServer, urls: list[str]
) -> None:
    config = Settings.of(
        database_url=settings.database_url, local_mode=True, warm_targets=(urls[0],)
    )
    status, body = hook(create_app(Service.of(config, engine)).test_client())
    assert status == 401 and "no secrets" in body["error"]
    assert nothing_ran(engine, targets, urls)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"not json", "not valid JSON"),
        (b"", "empty body"),
        (b"[1, 2]", "JSON object"),
        ({"service": "web"}, "'release' is missing"),
        ({"release": "v1"}, "'service' is missing"),
        ({"service": "web", "release": 7}, "'release' must be a string"),
        ({"service": "web", "release": "v" * 201}, "longer than 200"),
        ({**BODY, "environment": "e" * 300}, "'environment' is longer than 200"),
        ({**BODY, "commit": "c" * 201}, "'commit' is longer than 200"),
        (b'{"service": "web", "release": "v1", "environment": "\\ud800"}', "'environment'"),
        (b'{"service": "web", "release": "v1", "commit": "a\\u0000b"}', "'commit'"),
    ],
)
def test_a_signed_but_malformed_body_is_400_and_nothing_runs(
    client: FlaskClient,
    engine: Engine,
    targets: TargetServer,
    urls: list[str],
    body: Any,
    fragment: str,
) -> None:
    status, answer = hook(client, body=body)
    assert status == 400 and fragment in answer["error"]
    assert nothing_ran(engine, targets, urls)


def test_an_oversized_hook_is_413(
    client: FlaskClient, engine: Engine, targets: TargetServer, urls: list[str]
) -> None:
    status, _ = hook(client, body={**BODY, "padding": "x" * HOOK_MAX_BYTES})
    assert status == 413
    assert nothing_ran(engine, targets, urls)


def test_only_post_is_allowed(client: FlaskClient) -> None:
    assert client.get("/hooks/deploy").status_code == 405


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=30),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.sampled_from(["service", "release", "version", "x"]), children)
        ),
        max_leaves=12,
    )
    | st.fixed_dictionaries(
        {"service": st.text(max_size=250), "release": st.text(max_size=250)},
        optional={"environment": st.text(max_size=20), "commit": st.text(max_size=20)},
    ),
)
def test_any_signed_body_gets_a_200_or_a_clear_400_never_a_500(
    sqlite_url: str, document: Any
) -> None:
    config = Settings.of(database_url=sqlite_url, local_mode=True, deploy_hook_secrets=(SECRET,))
    engine = make_engine(sqlite_url)
    try:
        client = create_app(Service.of(config, engine)).test_client()
        status, body = hook(client, body=json.dumps(document).encode())
    finally:
        engine.dispose()
    assert status in (200, 400), body
    assert body["outcome"] in ("skipped", "duplicate", "rejected")
