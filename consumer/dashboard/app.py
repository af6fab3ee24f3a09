"""``create_dashboard(service)``: the dashboard's Flask app, its guards and its route table.

Every request but ``/healthz`` and the login form needs an identity (``access.Access``); every
POST needs the CSRF token. Pages are in ``pages``, actions in ``actions``; both reach the stores
through the ``Context`` kept on the app.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, g, render_template, request
from werkzeug.exceptions import HTTPException

from consumer.dashboard import actions, pages
from consumer.dashboard.access import CSRF_COOKIE, Access, csrf_ok, new_csrf_token
from consumer.dashboard.context import Context, context
from consumer.dashboard.formatting import FILTERS
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.migrate import require_schema_at_head
from consumer.errors import Unavailable
from consumer.service import Service
from consumer.wire.timeutil import Clock, utcnow

OPEN = frozenset({"healthz", "readyz", "static", "pages.login"})
"""Served without an identity: the probe, the stylesheet, and the form that gives one."""


def create_dashboard(service: Service, clock: Clock = utcnow) -> Flask:
    """The app; raises ``SettingsError`` outside local mode without authentication."""
    access = Access.from_settings(service.settings)
    app = Flask(__name__)
    app.extensions["dashboard"] = Context(service, access, clock)
    app.add_url_rule("/healthz", "healthz", lambda: {"status": "ok"})
    app.add_url_rule("/readyz", "readyz", _ready)
    app.register_blueprint(pages.blueprint)
    app.register_blueprint(actions.blueprint)
    app.before_request(_guard)
    app.after_request(_headers)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Unavailable, _unavailable)
    app.jinja_env.globals["csrf_token"] = _csrf_token
    app.jinja_env.filters.update(FILTERS)
    return app


def _ready() -> Any:
    """Ready once the database answers at the schema this code reads: a dashboard rolled out
    with a release must not serve pages (or actions) before the migration Job has run."""
    engine = context().engine
    with unavailable_on_db_fault(), engine.connect() as connection:
        require_schema_at_head(engine, connection)
    return {"status": "ready"}


def _guard() -> Any:
    """Refuse an unknown caller (401) and a POST without the CSRF token (403)."""
    g.who = context().access.who(request.headers, request.cookies)
    if request.method == "POST" and not csrf_ok(request.form, request.cookies):
        return _page("error.html", 403, message="missing or wrong CSRF token: reload the page")
    if g.who is None and request.endpoint not in OPEN:
        return _page("login.html", 401, message="sign in with the dashboard token")
    return None


def _csrf_token() -> str:
    """The token forms embed: the cookie's, or a new one set on this response."""
    if "csrf" not in g:
        g.csrf = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
    return str(g.csrf)


def _headers(response: Response) -> Response:
    if "csrf" in g and request.cookies.get(CSRF_COOKIE) != g.csrf:
        response.set_cookie(
            CSRF_COOKIE, g.csrf, httponly=True, samesite="Strict", secure=request.is_secure
        )
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'"
    )
    return response


def _page(template: str, status: int, **values: Any) -> tuple[str, int]:
    return render_template(template, **values), status


def _http_error(error: HTTPException) -> tuple[str, int]:
    return _page("error.html", error.code or 500, message=error.description)


def _unavailable(error: Unavailable) -> tuple[str, int]:
    return _page("error.html", 503, message=f"temporarily unavailable: {error}")
