"""Another team's Flask app with the consumer mounted under ``/consumer``: its own routes, its own
auth and its own error pages. ``app()`` and ``asgi()`` are gunicorn entry points (the service
composed from the environment, as ``consumer.http.wsgi`` does)."""

from __future__ import annotations

import os

from flask import Flask, Response, abort, request
from werkzeug.exceptions import HTTPException

from consumer.http.bridge import BufferedWsgi
from consumer.http.embed import Consumer
from consumer.http.wsgi import bridged
from consumer.service import Service, compose
from consumer.wire.timeutil import Clock, utcnow

PREFIX = "/consumer"
TEAM_KEY = "team-key"


def host_app(service: Service, clock: Clock = utcnow) -> Flask:
    app = Flask("host")
    app.config["MAX_CONTENT_LENGTH"] = None  # the team takes large uploads

    @app.get("/healthz")  # the team's own (the test servers wait for it)
    def healthz() -> str:
        return "ok"

    @app.get("/hello")
    def hello() -> str:
        return "hello from the team"

    @app.post("/upload")
    def upload() -> str:
        if request.headers.get("X-Team-Key") != TEAM_KEY:
            abort(401)
        return f"stored {len(request.get_data())} bytes"

    @app.errorhandler(HTTPException)
    def team_error(error: HTTPException) -> Response:
        return Response(
            f"<h1>team error {error.code}</h1>", error.code or 500, mimetype="text/html"
        )

    Consumer(app, service, url_prefix=PREFIX, clock=clock)
    return app


def app() -> Flask:
    return host_app(compose(os.environ))


def asgi() -> BufferedWsgi:
    return bridged(app())
