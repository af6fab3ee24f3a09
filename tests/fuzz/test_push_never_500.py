"""End to end through the app (Flask's test client, a real database): whatever arrives, the answer
is a JSON decision with a status from the outcome table, never a 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import strategies as hs
from tests.fuzz.conftest import fuzz_app

# 503 would mean a handler or the database failed: the echo handlers never do.
EXPECTED = {200, 400, 409, 413}
OUTCOMES = {"done", "duplicate", "dead", "unroutable", "skipped", "in-progress", "rejected"}
pytestmark = pytest.mark.slow  # hundreds of requests through the app and the database
SUPPRESS = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def sqlite_app(fuzz_sqlite_url: str) -> Iterator[Flask]:
    with fuzz_app(fuzz_sqlite_url) as app:
        yield app


@pytest.fixture(scope="module")
def postgres_app(fuzz_postgres_url: str) -> Iterator[Flask]:
    with fuzz_app(fuzz_postgres_url) as app:
        yield app


def check(app: Flask, headers: dict[str, str], body: bytes, method: str = "POST") -> None:
    response = app.test_client().open("/push", method=method, headers=headers, data=body)
    assert response.status_code in EXPECTED, (response.status_code, response.get_data()[:300])
    answer: Any = response.json
    assert isinstance(answer, dict) and answer["outcome"] in OUTCOMES
    assert "Traceback" not in response.get_data(as_text=True)


@settings(max_examples=400, deadline=None, suppress_health_check=SUPPRESS)
@given(request=hs.requests())
def test_sqlite_never_500(sqlite_app: Flask, request: tuple[dict[str, str], bytes]) -> None:
    check(sqlite_app, *request)


@pytest.mark.postgres
@settings(max_examples=200, deadline=None, suppress_health_check=SUPPRESS)
@given(request=hs.requests())
def test_postgres_never_500(postgres_app: Flask, request: tuple[dict[str, str], bytes]) -> None:
    """PostgreSQL refuses what SQLite takes (a NUL in text), so it gets its own run."""
    check(postgres_app, *request)


@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESS)
@given(
    headers=st.dictionaries(hs.HEADER_NAMES, hs.HEADER_TEXT, max_size=6),
    body=st.binary(max_size=512) | hs.JSON.map(lambda value: json.dumps(value).encode()),
    content_type=st.sampled_from(["application/json", "text/plain", "", "multipart/form-data"]),
)
def test_garbage_never_500(
    sqlite_app: Flask, headers: dict[str, str], body: bytes, content_type: str
) -> None:
    check(sqlite_app, {**headers, "Content-Type": content_type}, body)
