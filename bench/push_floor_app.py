"""The floors for ``bench/push_bench.py``, minimal Flask routes on one autocommit psycopg
connection per thread (a sync worker has one thread; the asyncio worker runs requests on several,
which must not queue on one connection). Served by gunicorn exactly like the real service:

- ``bench.push_floor_app:app()``: one ``INSERT ... ON CONFLICT DO NOTHING`` per request, the
  floor the issue names;
- ``bench.push_floor_app:two_writes()``: the least any exactly-once design writes per request,
  two durable statements: a claim committed before the handler runs (``INSERT ... ON CONFLICT
  DO NOTHING RETURNING``) and the outcome committed before the answer (``UPDATE`` by key). Its
  ratio to ``app()`` is the ceiling of the consumer's, whatever the Python around them costs;
- ``bench.push_floor_app:two_writes_wsgi()``: the same two writes answered by WSGI middleware in
  front of Flask (the JSON parsed and written by hand, no request context, no ``Response``), as
  the consumer serves ``/push`` (``consumer.http.deliveries``, behind the front door): the floor
  that framework savings cannot beat;
- ``bench.push_floor_app:one_commit()``: the same two statements in one transaction (``BEGIN``,
  claim, outcome, ``COMMIT``), as a one-commit handler writes them: one WAL flush, two more round
  trips. The ceiling of the consumer's one-commit push.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from flask import Flask, Response, jsonify, request

FLOOR_TABLE = "push_floor"
TWO_WRITES_TABLE = "push_floor_two_writes"
TWO_WRITES_WSGI_TABLE = "push_floor_two_writes_wsgi"
ONE_COMMIT_TABLE = "push_floor_one_commit"
TABLES = {
    FLOOR_TABLE: "key text PRIMARY KEY",
    TWO_WRITES_TABLE: "key text PRIMARY KEY, status text NOT NULL",
    TWO_WRITES_WSGI_TABLE: "key text PRIMARY KEY, status text NOT NULL",
    ONE_COMMIT_TABLE: "key text PRIMARY KEY, status text NOT NULL",
}
INSERT = f"INSERT INTO {FLOOR_TABLE} (key) VALUES (%s) ON CONFLICT DO NOTHING"


def _claim(table: str) -> str:
    return (
        f"INSERT INTO {table} (key, status) VALUES (%s, 'running') "
        "ON CONFLICT DO NOTHING RETURNING key"
    )


def _finish(table: str) -> str:
    return f"UPDATE {table} SET status = 'done' WHERE key = %s AND status = 'running'"


CLAIM, FINISH = _claim(TWO_WRITES_TABLE), _finish(TWO_WRITES_TABLE)
WSGI_CLAIM, WSGI_FINISH = _claim(TWO_WRITES_WSGI_TABLE), _finish(TWO_WRITES_WSGI_TABLE)
ONE_CLAIM, ONE_FINISH = _claim(ONE_COMMIT_TABLE), _finish(ONE_COMMIT_TABLE)


def app() -> Flask:
    def one_insert(connection: psycopg.Connection[Any], key: str) -> None:
        connection.execute(INSERT, (key,))

    return _floor_app("push-floor", one_insert)


def two_writes() -> Flask:
    def claim_then_finish(connection: psycopg.Connection[Any], key: str) -> None:
        if connection.execute(CLAIM, (key,)).fetchone() is not None:
            connection.execute(FINISH, (key,))

    return _floor_app("push-floor-two-writes", claim_then_finish)


def two_writes_wsgi() -> Flask:
    """``two_writes()``'s statements, ``POST /push`` answered before Flask (``/healthz`` is
    Flask's, and the asyncio worker bridges the app like any Flask app)."""
    flask_app = Flask("push-floor-two-writes-wsgi")
    flask_app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    conninfo = os.environ["PUSH_FLOOR_CONNINFO"]
    local = threading.local()
    flask_wsgi = flask_app.wsgi_app

    def push(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/push" or environ.get("REQUEST_METHOD") != "POST":
            return flask_wsgi(environ, start_response)
        if getattr(local, "connection", None) is None:
            local.connection = psycopg.connect(conninfo, autocommit=True)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        message = json.loads(environ["wsgi.input"].read(length) or b"{}").get("message", {})
        key = message.get("messageId")
        if local.connection.execute(WSGI_CLAIM, (key,)).fetchone() is not None:
            local.connection.execute(WSGI_FINISH, (key,))
        body = (json.dumps({"key": key, "outcome": "done"}, separators=(",", ":")) + "\n").encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [body]

    flask_app.wsgi_app = push  # type: ignore[method-assign]
    return flask_app


def one_commit() -> Flask:
    def claim_and_finish(connection: psycopg.Connection[Any], key: str) -> None:
        with connection.transaction():
            if connection.execute(ONE_CLAIM, (key,)).fetchone() is not None:
                connection.execute(ONE_FINISH, (key,))

    return _floor_app("push-floor-one-commit", claim_and_finish)


def _floor_app(name: str, write: Callable[[psycopg.Connection[Any], str], None]) -> Flask:
    """One connection per thread, opened lazily (after gunicorn forks)."""
    conninfo = os.environ["PUSH_FLOOR_CONNINFO"]
    flask_app = Flask(name)
    local = threading.local()

    def push() -> Response:
        if getattr(local, "connection", None) is None:
            local.connection = psycopg.connect(conninfo, autocommit=True)
        message = (request.get_json(force=True) or {}).get("message", {})
        write(local.connection, message.get("messageId"))
        return jsonify(outcome="done", key=message.get("messageId"))

    flask_app.add_url_rule("/push", "push", push, methods=["POST"])
    flask_app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    return flask_app
