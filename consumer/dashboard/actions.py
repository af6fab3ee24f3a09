"""The dashboard's actions: POST forms (CSRF-checked by the app's guard), each logged with who
did it. They go through the same code as the CLI: ``consumer.sources.replay``, the jobs store,
the tick tasks' controls (``consumer.ticks.controls``) and flow control's (``consumer.jobs
.flow_admin``)."""

from __future__ import annotations

import logging
from collections import Counter
from urllib.parse import urlencode

from flask import Blueprint, abort, g, render_template, request

from consumer.config.flow import OPTIONS, changes_of
from consumer.dashboard import queries
from consumer.dashboard.context import context
from consumer.dashboard.formatting import limit
from consumer.errors import ConsumerError
from consumer.jobs.flow_admin import FlowAdmin, KindFlow, NoSuchKind, kinds_flow, known
from consumer.jobs.limits import effective
from consumer.jobs.model import CancelOutcome
from consumer.jobs.store import JobStore
from consumer.sources.replay import replay
from consumer.ticks import controls as tasks

log = logging.getLogger("consumer.dashboard")
blueprint = Blueprint("actions", __name__, url_prefix="/actions")
REPLAY_ALL_LIMIT = 100
"""Dead events replayed by one click (each runs its handler in this request)."""


def _field(name: str) -> str:
    value = request.form.get(name, "").strip()
    if not value:
        abort(400, f"the form has no {name}")
    return value


def _job_id() -> int:
    raw = _field("job_id")
    if not raw.isdigit() or len(raw) > 18:
        abort(400, "job_id must be a positive whole number")
    return int(raw)


def _done(
    action: str, target: str, ok: bool, message: str, back: str, status: int | None = None
) -> tuple[str, int]:
    """Log the action with its author and show what it did (``status``: a refusal's own)."""
    log.info(
        "dashboard action",
        extra={"who": g.who, "action": action, "target": target, "ok": ok, "result": message},
    )
    page = render_template("result.html", who=g.who, ok=ok, message=message, back=back)
    return page, status or (200 if ok else 409)


@blueprint.post("/replay")
def replay_event() -> tuple[str, int]:
    """Replay one dead, unroutable or failed event through the pipeline, now."""
    key = _field("key")
    back = f"/inbox/event?{urlencode({'key': key})}"
    try:
        outcome = replay(context().service, key)
    except ConsumerError as exc:
        return _done("replay", key, False, str(exc), back)
    return _done("replay", key, True, f"replayed {key}: {outcome.kind.value}", back)


@blueprint.post("/replay-route")
def replay_route() -> tuple[str, int]:
    """Replay the dead events of one route, oldest first, up to a limit per click."""
    route = _field("route")
    keys = queries.dead_keys(context().engine, route, REPLAY_ALL_LIMIT)
    outcomes: Counter[str] = Counter()
    for key in keys:
        try:
            outcomes[replay(context().service, key).kind.value] += 1
        except ConsumerError:
            outcomes["not replayable"] += 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(outcomes.items()))
    message = f"replayed {len(keys)} dead {route} events" + (f": {summary}" if keys else "")
    back = f"/inbox?{urlencode({'route': route})}"
    return _done("replay-route", route, bool(keys), message, back)


@blueprint.post("/retry-job")
def retry_job() -> tuple[str, int]:
    job_id = _job_id()
    ctx = context()
    changed = JobStore(ctx.engine).retry(ctx.clock(), job_id)
    message = f"job {job_id} is pending again" if changed else f"job {job_id} is not dead"
    return _done("retry-job", str(job_id), bool(changed), message, f"/jobs/{job_id}")


@blueprint.post("/retry-kind")
def retry_kind() -> tuple[str, int]:
    kind = _field("kind")
    ctx = context()
    changed = JobStore(ctx.engine).retry_dead_of_kind(ctx.clock(), kind)
    message = f"{changed} dead {kind} jobs are pending again"
    return _done("retry-kind", kind, changed > 0, message, f"/jobs?{urlencode({'kind': kind})}")


@blueprint.post("/cancel-job")
def cancel_job() -> tuple[str, int]:
    job_id = _job_id()
    ctx = context()
    outcome = JobStore(ctx.engine).request_cancel(job_id, ctx.clock())
    message = CANCEL_MESSAGES[outcome].format(job_id)
    done = outcome in (CancelOutcome.CANCELLED, CancelOutcome.REQUESTED)
    return _done("cancel-job", str(job_id), done, message, f"/jobs/{job_id}")


CANCEL_MESSAGES = {
    CancelOutcome.CANCELLED: "job {} is cancelled",
    CancelOutcome.REQUESTED: "job {} is running: cancel requested, it ends at its next heartbeat",
    CancelOutcome.FINISHED: "job {} is already finished",
    CancelOutcome.UNKNOWN: "job {} does not exist",
}


@blueprint.post("/pause-task")
def pause_task() -> tuple[str, int]:
    """Pause a tick task on every pod, as its author (the signed-in identity)."""
    task = _field("task")
    reason = request.form.get("reason", "").strip() or "paused from the dashboard"
    try:
        message = tasks.pause(context().service, task, g.who, reason)
    except ConsumerError as exc:
        return _done("pause-task", task, False, str(exc), "/")
    return _done("pause-task", task, True, message, "/")


@blueprint.post("/resume-task")
def resume_task() -> tuple[str, int]:
    task = _field("task")
    try:
        message = tasks.resume(context().service, task, g.who)
    except ConsumerError as exc:
        return _done("resume-task", task, False, str(exc), "/")
    return _done("resume-task", task, True, message, "/")


@blueprint.post("/run-task")
def run_task() -> tuple[str, int]:
    """Run a tick task now, in this request, under a run-now key (its overlap policy holds)."""
    task = _field("task")
    try:
        outcome = tasks.run_now(context().service, task, g.who)
    except ConsumerError as exc:
        return _done("run-task", task, False, str(exc), "/")
    ran = outcome.kind.value in ("done", "duplicate")
    reason = outcome.details.get("reason") or outcome.details.get("error") or ""
    message = f"ran {task} now ({outcome.key}): {outcome.kind.value}" + (
        f", {reason}" if reason else ""
    )
    return _done("run-task", task, ran, message, "/")


@blueprint.post("/limit-kind")
def limit_kind() -> tuple[str, int]:
    """Change a job kind's cap and/or rate on every pod, as the signed-in identity, like
    ``consumer jobs limit KIND --cap N --rate N/1s``: a blank field is left as it is."""
    kind = _field("kind")
    try:
        shown = _kind_flow(kind)
        form = request.form
        changes = changes_of(*(form.get(name) for name in OPTIONS))
    except NoSuchKind as exc:
        return _done("limit-kind", kind, False, str(exc), "/", 404)
    except ValueError as exc:
        return _done("limit-kind", kind, False, str(exc), "/", 400)
    ctx = context()
    stored = FlowAdmin(ctx.engine).change(kind, changes, g.who, ctx.clock())
    in_force = limit(effective(shown.configured, stored))
    message = f"{kind} now runs with {in_force} (changed: {stored})"
    return _done("limit-kind", kind, True, message, "/")


@blueprint.post("/reset-kind-limit")
def reset_kind_limit() -> tuple[str, int]:
    """Drop the operators' change of a job kind's limits: back to its configured ones."""
    kind = _field("kind")
    try:
        shown = _kind_flow(kind)
    except NoSuchKind as exc:
        return _done("reset-kind-limit", kind, False, str(exc), "/", 404)
    ctx = context()
    FlowAdmin(ctx.engine).change(kind, None, g.who, ctx.clock())
    message = f"{kind} is back to its configured limits: {limit(shown.configured)}"
    return _done("reset-kind-limit", kind, True, message, "/")


def _kind_flow(kind: str) -> KindFlow:
    ctx = context()
    return known(kinds_flow(FlowAdmin(ctx.engine), ctx.registry, ctx.settings, ctx.clock()), kind)
