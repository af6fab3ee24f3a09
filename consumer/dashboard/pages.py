"""The dashboard's pages (GET) and its login form. Filters are checked: a bad value is a 400
that names it, never a 500."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any, TypeVar

from flask import Blueprint, abort, g, make_response, redirect, render_template, request
from werkzeug import Response

from consumer.dashboard import queries
from consumer.dashboard.access import TOKEN_COOKIE
from consumer.dashboard.context import context
from consumer.dashboard.plots import overview_plots
from consumer.deploy.store import WarmRuns
from consumer.inbox.model import Status as InboxStatus
from consumer.inbox.store import Inbox
from consumer.jobs.flow_admin import FlowAdmin, kinds_flow
from consumer.jobs.model import Status as JobStatus
from consumer.jobs.store import JobStore
from consumer.storage.model import FileStatus
from consumer.storage.store import ProcessedFiles

log = logging.getLogger("consumer.dashboard")
blueprint = Blueprint("pages", __name__)
LIMIT = 100
E = TypeVar("E", bound=StrEnum)


def _choice(name: str, enum: type[E]) -> E | None:
    """An optional enum filter from the query string; 400 naming the allowed values."""
    raw = request.args.get(name, "")
    if not raw:
        return None
    try:
        return enum(raw)
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        abort(400, f"{name} must be one of: {allowed}")


def _page(template: str, **values: Any) -> str:
    return render_template(template, who=g.who, args=request.args, **values)


@blueprint.get("/")
def overview() -> str:
    ctx = context()
    view = queries.overview(ctx.engine, ctx.registry, ctx.clock())
    plots = overview_plots(ctx.engine, view.now)
    flow = kinds_flow(FlowAdmin(ctx.engine), ctx.registry, ctx.settings, view.now).values()
    return _page("overview.html", view=view, plots=plots, flow=flow, refresh=True)


@blueprint.get("/inbox")
def inbox() -> str:
    ctx = context()
    rows = queries.inbox_rows(
        ctx.engine,
        status=_choice("status", InboxStatus),
        route=request.args.get("route") or None,
        key_contains=request.args.get("key") or None,
        limit=LIMIT,
    )
    statuses = [s.value for s in InboxStatus]
    return _page(
        "inbox.html",
        rows=rows,
        statuses=statuses,
        routes=queries.routes(ctx.engine),
        dead_by_route=queries.dead_events_by_route(ctx.engine),
        refresh=True,
    )


@blueprint.get("/inbox/event")
def inbox_event() -> str:
    key = request.args.get("key", "")
    row = Inbox(context().engine).get(key) if key else None
    if row is None:
        abort(404, f"no inbox row {key!r}")
    return _page("inbox_event.html", row=row)


@blueprint.get("/jobs")
def jobs() -> str:
    ctx = context()
    rows = JobStore(ctx.engine).list(
        _choice("status", JobStatus), request.args.get("kind") or None, LIMIT
    )
    statuses = [s.value for s in JobStatus]
    by_kind = queries.job_counts(ctx.engine)  # also the filter's kinds: one scan, not two
    dead_by_kind = {
        kind: counts[JobStatus.DEAD]
        for kind, counts in by_kind.items()
        if counts.get(JobStatus.DEAD)
    }
    kinds = list(by_kind)
    return _page(
        "jobs.html", rows=rows, statuses=statuses, kinds=kinds, dead_by_kind=dead_by_kind,
        refresh=True,
    )  # fmt: skip


@blueprint.get("/jobs/<int:job_id>")
def job(job_id: int) -> str:
    found = JobStore(context().engine).get(job_id)
    if found is None:
        abort(404, f"no job {job_id}")
    return _page("job.html", job=found)


@blueprint.get("/files")
def files() -> str:
    rows = ProcessedFiles(context().engine).list(_choice("status", FileStatus), LIMIT)
    return _page("files.html", rows=rows, statuses=[s.value for s in FileStatus], refresh=True)


@blueprint.get("/warm")
def warm_runs() -> str:
    return _page("warm.html", rows=WarmRuns(context().engine).recent(LIMIT), refresh=True)


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """The token form; a right token becomes an HttpOnly, same-site cookie."""
    if request.method == "GET":
        return render_template("login.html", message="")
    if not context().access.token_matches(request.form.get("token", "")):
        log.warning("dashboard sign-in refused", extra={"remote": request.remote_addr})
        return render_template("login.html", message="wrong token"), 401
    response = make_response(redirect("/", code=303))
    response.set_cookie(
        TOKEN_COOKIE,
        request.form["token"],
        httponly=True,
        samesite="Strict",
        secure=request.is_secure,
    )
    return response


@blueprint.post("/logout")
def logout() -> Response:
    response = redirect("/login", code=303)
    response.delete_cookie(TOKEN_COOKIE)
    return response
