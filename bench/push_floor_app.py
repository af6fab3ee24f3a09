"""The floor for ``bench/push_bench.py``: a minimal Flask route doing one
``INSERT ... ON CONFLICT DO NOTHING`` per request, on one autocommit psycopg connection per
thread (a sync worker has one thread; the asyncio worker runs requests on several, which must
not queue on one connection). Served by gunicorn exactly like the real service:
``bench.push_floor_app:app()``."""

from __future__ import annotations

import os
import threading

import psycopg
from flask import Flask, Response, jsonify, request

FLOOR_TABLE = "push_floor"
INSERT = f"INSERT INTO {FLOOR_TABLE} (key) VALUES (%s) ON CONFLICT DO NOTHING"


def app() -> Flask:
    """One connection per thread, opened lazily (after gunicorn forks)."""
    conninfo = os.environ["PUSH_FLOOR_CONNINFO"]
    flask_app = Flask("push-floor")
    local = threading.local()

    def push() -> Response:
        if getattr(local, "connection", None) is None:
            local.connection = psycopg.connect(conninfo, autocommit=True)
        message = (request.get_json(force=True) or {}).get("message", {})
        local.connection.execute(INSERT, (message.get("messageId"),))
        return jsonify(outcome="done", key=message.get("messageId"))

    flask_app.add_url_rule("/push", "push", push, methods=["POST"])
    flask_app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    return flask_app
