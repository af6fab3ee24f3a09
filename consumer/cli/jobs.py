"""``consumer jobs ...`` and ``consumer sweep --once`` (added to the main group in
consumer.cli.main)."""

from __future__ import annotations

import getpass
import json
import uuid
from datetime import datetime
from typing import Any

import click
from sqlalchemy import Engine

from consumer.cli.context import current_cli
from consumer.config.flow import NO_LIMIT, changes_of
from consumer.jobs.flow_admin import FlowAdmin, kinds_flow, known
from consumer.jobs.model import CancelOutcome, EnqueueResult, InvalidJob, Job, Status, group_from
from consumer.jobs.store import JobStore, enqueue
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.storage.local_import import enqueue_file_command
from consumer.wire.events import TickEvent
from consumer.wire.message import Format, PushMessage
from consumer.wire.timeutil import parse_rfc3339, utcnow


def _engine() -> Engine:
    return current_cli().engine


def _parse_json(_ctx: click.Context, _param: click.Parameter, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from exc


def _parse_time(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise click.BadParameter(f"expected an RFC 3339 time with a zone: {exc}") from exc


@click.group()
def jobs() -> None:
    """Enqueue, inspect, retry and cancel jobs."""


@jobs.command("enqueue")
@click.argument("kind")
@click.option("--payload", default="{}", callback=_parse_json, help="The job's JSON payload.")
@click.option("--key", default=None, help="Idempotency key: a second job with it is refused.")
@click.option(
    "--run-at", default=None, callback=_parse_time, help="RFC 3339, e.g. 2026-01-01T09:00:00Z."
)
@click.option("--priority", default=0, show_default=True, help="Higher runs first.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=None)
@click.option("--lock-key", default=None, help="Jobs sharing it run one at a time, in order.")
@click.option("--group", default=None, help="Jobs of different groups take turns.")
@click.option(
    "--from", "from_file", default=None, type=click.Path(exists=True, dir_okay=False),
    help="A JSON Lines or CSV file: one KIND job per row (keys PREFIX:LINE; rows reported by "
    "line). Not with --payload or --key.",
)  # fmt: skip
@click.option("--format", "file_format", type=click.Choice(["auto", "jsonl", "csv"]),
              default="auto", show_default=True, help="Of --from; auto: .csv is CSV.")  # fmt: skip
@click.option("--key-prefix", default=None, help="Of --from; default: a digest of the file.")
@click.option("--unknown", is_flag=True, help="Enqueue even if no registered plugin provides KIND.")
def enqueue_command(
    kind: str,
    payload: Any,
    key: str | None,
    run_at: datetime | None,
    priority: int,
    max_attempts: int | None,
    from_file: str | None,
    file_format: str,
    key_prefix: str | None,
    unknown: bool,
    lock_key: str | None,
    group: str | None,
) -> None:
    """Add a KIND job (or, with --from, one per row of a file). A duplicate key is reported
    (exit status 0), not inserted twice; a KIND that no registered plugin (CONSUMER_PLUGINS)
    provides is refused without --unknown."""

    registry = current_cli().registry
    kinds = registry.job_kinds.names()  # the built-in kinds and the plugins'
    if from_file is not None:
        if lock_key is not None or group is not None:
            raise click.UsageError("--lock-key and --group apply to one job, not with --from")
        options = (kind, run_at, priority, max_attempts, from_file, file_format, key_prefix)
        raise SystemExit(enqueue_file_command(_engine, payload, key, *options))
    try:
        result = enqueue(
            _engine(), kind, payload, key=key, run_at=run_at, priority=priority,
            max_attempts=max_attempts, kinds=kinds, allow_unknown=unknown, lock_key=lock_key,
            group=group or group_from(payload, registry.job_limits.get(kind, NO_LIMIT).group_by),
        )  # fmt: skip
    except InvalidJob as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(_enqueued(result, key)))


def _enqueued(result: EnqueueResult, key: str | None) -> dict[str, Any]:
    if result.inserted:
        return {"outcome": "enqueued", "id": result.job_id}
    return {"outcome": "duplicate", "id": result.job_id, "key": key}


@jobs.command("list")
@click.option("--status", type=click.Choice([s.value for s in Status]), default=None)
@click.option("--kind", default=None)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
def list_command(status: str | None, kind: str | None, limit: int) -> None:
    """Newest first: id, status, attempts, kind, run_at, last error."""

    for job in JobStore(_engine()).list(Status(status) if status else None, kind, limit):
        click.echo(_line(job))


def _line(job: Job) -> str:
    error = f"  {job.last_error[:80]}" if job.last_error else ""
    return (
        f"{job.id:>8}  {job.status:<9}  {job.attempts:>2}  {job.kind:<12}  "
        f"{job.run_at:%Y-%m-%d %H:%M:%S}{error}"
    )


@jobs.command("show")
@click.argument("job_id", type=int)
def show_command(job_id: int) -> None:
    """One job in full, with its error history."""

    job = JobStore(_engine()).get(job_id)
    if job is None:
        raise click.ClickException(f"no job {job_id}")
    click.echo(json.dumps(job._asdict(), default=str, indent=2))


@jobs.command("retry")
@click.argument("job_id", type=int, required=False)
@click.option("--dead", is_flag=True, help="Every dead job.")
def retry_command(job_id: int | None, dead: bool) -> None:
    """Make a dead or cancelled job (or, with --dead, every dead job) pending again with fresh
    attempts; its error history is kept."""

    if job_id is None and not dead:
        raise click.UsageError("give a job ID or --dead (every dead job)")
    if job_id is not None and dead:
        raise click.UsageError("give a job ID or --dead, not both")
    count = JobStore(_engine()).retry(utcnow(), None if dead else job_id)
    if job_id is not None and count == 0:
        raise click.ClickException(
            f"job {job_id} is missing, not dead or cancelled, or a later pending job holds its "
            "debounce key"
        )
    click.echo(json.dumps({"outcome": "retried", "count": count}))


@jobs.command("cancel")
@click.argument("job_id", type=int)
def cancel_command(job_id: int) -> None:
    """Cancel a job: a pending one now; a running one at its next heartbeat (its handler is
    told, a target's call is abandoned), after which it ends cancelled, never retried."""

    outcome = JobStore(_engine()).request_cancel(job_id, utcnow())
    if outcome is CancelOutcome.UNKNOWN:
        raise click.ClickException(f"job {job_id} is missing")
    if outcome is CancelOutcome.FINISHED:
        raise click.ClickException(f"job {job_id} is already finished")
    click.echo(json.dumps({"outcome": outcome.value, "id": job_id}))


@jobs.command("limits")
def limits_command() -> None:
    """Each job kind's cap and rate (in force, configured, and an operator's change) and its
    running jobs, one JSON line per kind."""

    service = current_cli().service
    shown = kinds_flow(FlowAdmin(_engine()), service.registry, service.settings, utcnow())
    for kind in shown.values():
        click.echo(json.dumps(kind.describe()))


@jobs.command("limit")
@click.argument("kind")
@click.option("--cap", default=None, help="Most jobs of KIND running at once (none: no cap).")
@click.option("--rate", default=None, help="Most starts per interval, e.g. 50/1s (none: no rate).")
@click.option("--group-cap", default=None, help="Most jobs of each group of KIND running at once.")
@click.option("--group-rate", default=None, help="Most starts per interval of each group of KIND.")
@click.option("--reset", is_flag=True, help="Back to the configured cap and rate.")
@click.option(
    "--by", default=None, help="Who makes the change, for the log (default: the OS user)."
)
def limit_command(
    kind: str,
    cap: str | None,
    rate: str | None,
    group_cap: str | None,
    group_rate: str | None,
    reset: bool,
    by: str | None,
) -> None:
    """Change KIND's cap or rate at run time, on every pod; logged with who did it. Lowering a
    cap stops no running job: none is claimed until fewer than the new cap run."""

    if reset == any(value is not None for value in (cap, rate, group_cap, group_rate)):
        raise click.UsageError("give --cap, --rate, --group-cap and/or --group-rate, or --reset")
    try:
        changes = None if reset else changes_of(cap, rate, group_cap, group_rate)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    service, admin = current_cli().service, FlowAdmin(_engine())
    known(kinds_flow(admin, service.registry, service.settings, utcnow()), kind)  # not a typo
    who = by or getpass.getuser()
    stored = admin.change(kind, changes, who, utcnow())
    click.echo(json.dumps({"outcome": "changed", "kind": kind, "limits": stored, "by": who}))


@click.command("sweep")
@click.option("--once", is_flag=True, help="Run one sweep now (required; ticks do the rest).")
@click.option(
    "--budget",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds; default: the handler budget.",
)
def sweep_command(once: bool, budget: float | None) -> None:
    """Run the sweep tick handler once, in this process, and print its summary.

    It skips the inbox on purpose: a manual sweep always runs, even beside a tick's sweep;
    the job claims keep them apart."""
    if not once:
        raise click.UsageError("use --once; in a cluster, Cloud Scheduler ticks run the sweep")
    click.echo(json.dumps(run_sweep_once(current_cli().service, budget)))


def run_sweep_once(service: Service, budget: float | None = None) -> dict[str, Any]:
    """The registered ``sweep`` task, decided by the same pipeline as a tick (logged, counted,
    errors turned into outcomes) but without taking the tick's inbox slot. A database that is
    missing, unreachable or not migrated is refused first, in one line."""
    settings, registry = service.settings, service.registry
    settings.require_mail_transport()  # the sweep runs the email kind
    service.require_database()
    now, schedule = utcnow(), registry.schedule_of("sweep")
    message = PushMessage(
        f"cli-{uuid.uuid4().hex}", now, attributes={"task": "sweep"}, format=Format.CLI
    )
    event = TickEvent("sweep", schedule.slot_of(now), schedule, message)
    dispatcher = Dispatcher(settings, service.engine, registry)
    outcome = dispatcher.run_unclaimed(event, Source.CLI, budget)
    if outcome.kind.value != "done":
        raise click.ClickException(f"sweep {outcome.kind.value}: {outcome.details.get('error')}")
    return {k: v for k, v in outcome.details.items() if k != "attempt"}
