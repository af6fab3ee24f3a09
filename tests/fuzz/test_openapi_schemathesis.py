"""schemathesis against ``consumer/http/openapi.yaml`` and the live app (WSGI, a real SQLite
database): no 500, and every response matches the description (status, content type, body
schema, headers).

Positive and negative cases. Two of schemathesis's checks are left out on purpose: the push
endpoint is lenient where Pub/Sub is (unknown fields and any Content-Type are accepted, so
``negative_data_rejection`` does not hold), and a schema-valid body can still be a bad event (a
tick without a task name is a 400, so ``positive_data_acceptance`` does not either)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from urllib.parse import unquote

import pytest
import schemathesis
import yaml
from flask import Flask
from hypothesis import HealthCheck, settings
from schemathesis import checks
from werkzeug.test import TestResponse

from consumer.auth.signature import request_message, signed_headers
from consumer.http.app import built_with
from consumer.http.openapi import text
from tests.fuzz.conftest import fuzz_app

CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]
SECRET = "fuzz-deploy-hook-secret-0123456789"


# The description exactly as shipped in the package.
schema = schemathesis.openapi.from_dict(yaml.safe_load(text()))


@pytest.fixture(scope="module")
def app(fuzz_sqlite_url: str) -> Iterator[Flask]:
    with fuzz_app(
        fuzz_sqlite_url,
        deploy_hook_secrets=(SECRET,),
        tick_hook_secrets=(SECRET,),
        job_api_secrets=(SECRET,),
    ) as app:
        yield app


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_the_app_keeps_the_promises_of_its_description(app: Flask, case: schemathesis.Case) -> None:
    if case.path == "/hooks/deploy" and isinstance(case.body, dict):
        # Sign it, or every hook case would stop at the signature check (401).
        case.validate_response(signed_hook_call(app, case), checks=CHECKS)
    elif case.path == "/ticks/{task}" and isinstance(case.body, dict):
        case.validate_response(signed_tick_call(app, case), checks=CHECKS)
    elif case.path.startswith("/jobs"):
        case.validate_response(signed_job_call(app, case), checks=CHECKS)
    else:
        case.call_and_validate(app=app, checks=CHECKS)


def signed_hook_call(app: Flask, case: schemathesis.Case) -> TestResponse:
    body = json.dumps(case.body).encode()
    headers = {**signed_headers(SECRET, int(time.time()), body), "Content-Type": "application/json"}
    return app.test_client().post("/hooks/deploy", data=body, headers=headers)


def signed_tick_call(app: Flask, case: schemathesis.Case) -> TestResponse:
    """A signed tick whose body names the task of its path (or fuzzes it, when it sets one)."""
    task = str((case.path_parameters or {}).get("task", ""))
    body = json.dumps({"task": task, **case.body}).encode()
    headers = {**signed_headers(SECRET, int(time.time()), body), "Content-Type": "application/json"}
    return app.test_client().post(case.formatted_path, data=body, headers=headers)


def signed_job_call(app: Flask, case: schemathesis.Case) -> TestResponse:
    """A job API call signed over its method, path (as the server decodes it) and body."""
    has_body = case.method == "POST" and isinstance(case.body, dict | list | str | int | float)
    body = json.dumps(case.body).encode() if has_body else b""
    path = unquote(case.formatted_path)
    signed = request_message(case.method, path, body)
    headers = {
        **signed_headers(SECRET, int(time.time()), signed),
        "Content-Type": "application/json",
    }
    return app.test_client().open(
        case.formatted_path, method=case.method, data=body, headers=headers
    )


def test_the_description_is_shipped_and_served(fuzz_sqlite_url: str) -> None:
    with fuzz_app(fuzz_sqlite_url) as app:
        response = app.test_client().get("/openapi.yaml")
    assert response.status_code == 200
    assert response.content_type.startswith("application/yaml")
    assert response.get_data(as_text=True) == text()
    assert "openapi: 3.0" in text()


def test_every_route_of_the_app_is_described(app: Flask) -> None:
    """The route table's rows (the door answers the deliveries, Flask the probes)."""
    built = built_with(app)
    assert built is not None
    routes = {route.path for route in built.gated.gate.routes}
    assert routes == set(yaml.safe_load(text())["paths"])
