"""The floor for ``bench/push_bench.py``: a minimal Flask route doing one
``INSERT ... ON CONFLICT DO NOTHING`` per request, on one autocommit psycopg connection per
worker. Served by gunicorn exactly like the real service: ``bench.push_floor_app:app()``."""

from __future__ import annotations

import os

import psycopg
from flask import Flask, Response, jsonify, request

FLOOR_TABLE = "push_floor"
INSERT = f"INSERT INTO {FLOOR_TABLE} (key) VALUES (%s) ON CONFLICT DO NOTHING"


def app() -> Flask:
    """One connection per worker, opened lazily (after gunicorn forks)."""
    conninfo = os.environ["PUSH_FLOOR_CONNINFO"]
    flask_app = Flask("push-floor")
    holder: list[psycopg.Connection] = []

    def push() -> Response:
        if not holder:
            holder.append(psycopg.connect(conninfo, autocommit=True))
        message = (request.get_json(force=True) or {}).get("message", {})
        holder[0].execute(INSERT, (message.get("messageId"),))
        return jsonify(outcome="done", key=message.get("messageId"))

    flask_app.add_url_rule("/push", "push", push, methods=["POST"])
    flask_app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    return flask_app
