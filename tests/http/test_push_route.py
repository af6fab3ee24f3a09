"""``POST /push`` has one implementation (``consumer.http.deliveries``), answered by the front door
however it is mounted: the same sequence of pushes, sent to two apps on two fresh databases, the
plain app and a host app with the extension mounted under a prefix, gets the same statuses,
headers and body bytes, and leaves the same inbox rows."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from werkzeug.test import Client

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.http.app import built_with, create_app
from consumer.http.door import GatedWsgi
from consumer.http.embed import Consumer
from consumer.inbox.store import Inbox
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from tests.conftest import PG_ADMIN_DSN, Clock, migrated_postgres_database
from tests.wire.test_golden_formats import CASES, load_case

LIMIT = 4096
Send = Callable[[Client, str], Any]
PREFIX = "/consumer"


class Served:
    """One app on its own SQLite database: the plain app, or a host with the extension."""

    def __init__(self, settings: Settings, clock: Clock, url: str, embedded: bool) -> None:
        self.engine = make_engine(url)
        service = Service.of(settings.with_values(database_url=url), self.engine)
        if embedded:
            app = Flask("host")
            Consumer(app, service, url_prefix=PREFIX, clock=clock)
        else:
            app = create_app(service, clock)
        built = built_with(app)
        assert built is not None and isinstance(built.gated, GatedWsgi)
        self.prefix = PREFIX if embedded else ""
        self.client = Client(app)

    def send(self, send: Send) -> Any:
        return send(self.client, self.prefix)

    def rows(self) -> list[tuple[str, str, int]]:
        rows = Inbox(self.engine).list()
        return sorted((row.key, row.status.value, row.attempts) for row in rows)


@contextmanager
def another_database(url: str, tmp_path: Path) -> Iterator[str]:
    """A second fresh, migrated database of the same kind as ``url``."""
    if url.startswith("sqlite"):
        other = f"sqlite:///{tmp_path / 'flask.db'}"
        upgrade(other)
        yield other
    else:
        with migrated_postgres_database(PG_ADMIN_DSN) as other:
            yield other


@pytest.fixture
def pair(settings: Settings, clock: Clock, tmp_path: Path) -> Iterator[tuple[Served, Served]]:
    settings = settings.with_values(max_body_bytes=LIMIT)
    with another_database(settings.database_url, tmp_path) as other:
        served = Served(settings, clock, settings.database_url, embedded=False)
        flask = Served(settings, clock, other, embedded=True)
        yield served, flask
        served.engine.dispose()
        flask.engine.dispose()


def answered(served: Served, send: Send) -> tuple[int, str | None, str | None, bytes]:
    response = served.send(send)
    headers = response.headers
    return (response.status_code, headers.get("Content-Type"), headers.get("Content-Length"),
            response.get_data())  # fmt: skip


def golden(name: str) -> Send:
    headers, body, _ = load_case(name)
    return lambda client, prefix: client.post(f"{prefix}/push", data=body, headers=headers)


def raw(body: bytes, content_type: str = "application/json") -> Send:
    return lambda client, prefix: client.post(
        f"{prefix}/push", data=body, content_type=content_type
    )


def chunked(body: bytes) -> Send:
    """No Content-Length: the body ends where the server says (as gunicorn marks a chunked one)."""
    overrides = {"wsgi.input_terminated": True}
    return lambda client, prefix: client.post(
        f"{prefix}/push", input_stream=io.BytesIO(body), environ_overrides=overrides,
        content_type="application/json",
    )  # fmt: skip


def test_the_plain_and_the_embedded_app_answer_every_push_alike(
    pair: tuple[Served, Served],
) -> None:
    served, flask = pair
    _, first_body, _ = load_case(CASES[0])
    wrapped = json.loads(first_body) if first_body.startswith(b"{") else None
    sends: list[Send] = [golden(name) for name in CASES]
    sends += [
        golden(CASES[0]),  # a redelivery: duplicate
        raw(b"{not json"),
        raw(b'{"message": {}}'),
        raw(b"[]"),
        raw(b""),
        chunked(b" " * (LIMIT + 1)),  # over the limit without a declared size: 413 (the gate)
        chunked(b'{"message": {"data": "' + b"A" * (LIMIT - 40) + b'"}}'),  # at the limit
        lambda client, prefix: client.get(f"{prefix}/push"),  # the route table's 405
        lambda client, prefix: client.open(f"{prefix}/push", method="post", data=b"{}"),
        lambda client, prefix: client.post(f"{prefix}/push/", data=b"{}"),  # no row: 404
    ]
    if wrapped is not None:
        sends.append(raw(json.dumps(wrapped).encode(), content_type="text/plain"))
    seen = set()
    for send in sends:
        ours, theirs = answered(served, send), answered(flask, send)
        assert ours == theirs
        seen.add(ours[0])
    assert {200, 400, 404, 405, 413} <= seen  # the cases reach what they are meant to
    keys = {load_case(name)[2]["key"] for name in CASES}
    assert served.rows() == flask.rows() and {key for key, *_ in served.rows()} == keys


def test_an_unexpected_exception_is_the_same_json_500(
    pair: tuple[Served, Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug in a handler's wrapper")

    monkeypatch.setattr(Dispatcher, "dispatch", broken)
    served, flask = pair
    send = golden(CASES[0])
    ours, theirs = answered(served, send), answered(flask, send)
    assert ours == theirs and ours[0] == 500
    assert json.loads(ours[3])["outcome"] == "error"
