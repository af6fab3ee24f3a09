"""Limits on hostile input: body size (413, before the body is read into memory, chunked or not),
JSON nesting depth, JSON values and attribute count (400). Nothing is stored for a refused
request."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.http.app import create_app
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import Server

LIMIT = 64 * 1024


def limited(sqlite_url: str) -> Settings:
    return Settings.of(
        database_url=sqlite_url,
        local_mode=True,
        max_body_bytes=LIMIT,
        max_attributes=5,
        max_json_depth=8,
    )


@pytest.fixture
def app_settings(sqlite_url: str) -> Settings:
    return limited(sqlite_url)


def stored(sqlite_url: str) -> int:
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(select(func.count()).select_from(inbox)) or 0)
    finally:
        engine.dispose()


def test_a_body_over_the_limit_gets_413(client: FlaskClient, sqlite_url: str) -> None:
    body = json.dumps(wrapped_body(data=b"x" * LIMIT)).encode()
    response = client.post("/push", data=body, content_type="application/json")
    assert response.status_code == 413
    assert response.json["outcome"] == "rejected"
    assert stored(sqlite_url) == 0


def test_a_body_just_under_the_limit_is_accepted(client: FlaskClient) -> None:
    body = json.dumps(wrapped_body(data=b"x" * (LIMIT // 2))).encode()
    assert len(body) < LIMIT
    assert client.post("/push", data=body, content_type="application/json").status_code == 200


def nested(levels: int) -> dict[str, Any]:
    """A wrapped body whose deepest point is ``levels`` deep."""
    body: dict[str, Any] = wrapped_body()
    inner: Any = "leaf"
    for _ in range(levels - 1):
        inner = [inner]
    body["extra"] = inner  # the body object is level 1, so this reaches ``levels``
    return body


def test_nesting_deeper_than_the_limit_gets_400(client: FlaskClient, sqlite_url: str) -> None:
    assert client.post("/push", json=nested(8)).status_code == 200
    response = client.post("/push", json=nested(9))
    assert response.status_code == 400
    assert "nested deeper than 8" in response.json["error"]
    assert stored(sqlite_url) == 1


def test_more_attributes_than_the_limit_get_400(client: FlaskClient, sqlite_url: str) -> None:
    five = {f"a{i}": "v" for i in range(5)}
    assert client.post("/push", json=wrapped_body(attributes=five)).status_code == 200
    response = client.post("/push", json=wrapped_body(attributes={**five, "a5": "v"}))
    assert response.status_code == 400
    assert "more than 5 attributes" in response.json["error"]
    assert stored(sqlite_url) == 1


def deploy_with_values(values: int) -> dict[str, Any]:
    """A wrapped deploy whose data holds ``values`` JSON values (at least 10; the body: 19)."""
    extra = [0] * (values - 9)  # 8 keys and values, the list, then its items
    payload = {"event": "deploy", "service": "web", "release": "r1", "extra": extra}
    return wrapped_body(data=json.dumps(payload).encode(), attributes={"event": "deploy"})


def test_data_with_more_values_than_the_configured_limit_gets_400(sqlite_url: str) -> None:
    """``CONSUMER_MAX_JSON_NODES`` bounds the message's data as well as the body around it."""
    settings = Settings.of(database_url=sqlite_url, local_mode=True, max_json_nodes=24)
    engine = make_engine(sqlite_url)
    try:
        client = create_app(Service.of(settings, engine)).test_client()
        assert client.post("/push", json=deploy_with_values(24)).status_code == 200
        response = client.post("/push", json=deploy_with_values(25))
    finally:
        engine.dispose()
    assert response.status_code == 400
    assert response.json["error"] == "message data has more than 24 JSON values"
    assert stored(sqlite_url) == 1


def test_unwrapped_headers_count_as_attributes(client: FlaskClient) -> None:
    metadata = {
        "x-goog-pubsub-message-id": "1",
        "x-goog-pubsub-publish-time": "2024-01-01T00:00:00Z",
        "x-goog-pubsub-subscription-name": "projects/p/subscriptions/s",
    }
    six = {f"attr-{i}": "v" for i in range(6)}
    response = client.post("/push", data=b"raw", headers={**metadata, **six})
    assert response.status_code == 400


# --- Through gunicorn: what Werkzeug's test client cannot show. ---------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One server for the module: starting gunicorn is the slow part."""
    tmp_path = tmp_path_factory.mktemp("limits")
    database_url = f"sqlite:///{tmp_path / 'consumer.db'}"
    upgrade(database_url)
    env = {
        "CONSUMER_DATABASE_URL": database_url,
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_MAX_BODY_BYTES": str(LIMIT),
        "CONSUMER_LOG_LEVEL": "WARNING",
    }
    with Server(env, workers=1, output=tmp_path / "out.log") as running:
        yield running


def raw_request(server: Server, head: bytes, chunks: list[bytes]) -> bytes:
    """Send a request on a raw socket, tolerating the server closing early; return the reply."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(head)
            for chunk in chunks:
                sock.sendall(chunk)
        except OSError:
            pass  # refused mid-body: the reply is already on its way
        reply = b""
        try:
            while data := sock.recv(65536):
                reply += data
        except OSError:
            pass
    return reply


def head(extra: str) -> bytes:
    return (
        f"POST /push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}\r\n"
    ).encode()


@pytest.mark.slow
def test_a_huge_content_length_gets_413_without_the_body_being_sent(server: Server) -> None:
    started = time.monotonic()
    reply = raw_request(server, head(f"Content-Length: {10**12}\r\n"), [])
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - started < 5


def chunked(body: bytes, size: int = 4096) -> list[bytes]:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces] + [b"0\r\n\r\n"]


@pytest.mark.slow
def test_a_chunked_body_over_the_limit_is_cut_off_with_413(server: Server) -> None:
    body = json.dumps(wrapped_body(data=b"x" * (4 * LIMIT))).encode()
    reply = raw_request(server, head("Transfer-Encoding: chunked\r\n"), chunked(body))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


@pytest.mark.slow
def test_a_chunked_body_under_the_limit_is_read(server: Server) -> None:
    body = json.dumps(wrapped_body(data=b"small")).encode()
    reply = raw_request(server, head("Transfer-Encoding: chunked\r\n"), chunked(body, size=50))
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert b'"outcome":"unroutable"' in reply
