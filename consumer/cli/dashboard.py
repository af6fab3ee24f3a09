"""``consumer dashboard`` and ``consumer status``."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from consumer.cli.context import as_env, current_cli
from consumer.dashboard.access import Access
from consumer.dashboard.queries import overview
from consumer.dashboard.status import render
from consumer.errors import SettingsError
from consumer.jobs.flow_admin import FlowAdmin, kinds_flow
from consumer.wire.timeutil import utcnow


def gunicorn_command(bind: str, workers: int, timeout: int) -> list[str]:
    """One gunicorn for the dashboard; a replay runs its handler in the request, so the worker
    timeout is the ack deadline like the service's."""
    return [
        sys.executable, "-m", "gunicorn",
        "--bind", bind,
        "--workers", str(workers),
        "--timeout", str(timeout),
        "--config", "python:consumer.dashboard.gunicorn_conf",  # serve's log format
        "--no-control-socket",
        "consumer.dashboard.wsgi:app()",
    ]  # fmt: skip


@click.command("dashboard")
@click.option("--local", is_flag=True, help="Insecure local mode: no sign-in (loopback only).")
@click.option("--bind", default=None, help="host:port (CONSUMER_DASHBOARD_BIND, 127.0.0.1:8081).")
@click.option("--workers", default=2, show_default=True, help="gunicorn workers.")
def dashboard(local: bool, bind: str | None, workers: int) -> None:
    """Serve the operator's dashboard on its own listener (never the push port)."""
    overrides: dict[str, Any] = {"dashboard_bind": bind, "local_mode": "true" if local else None}
    service, env = current_cli().compose(**overrides), as_env(overrides)
    settings = service.settings
    try:
        Access.from_settings(settings)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from exc
    if settings.dashboard.bind == settings.server.bind:
        raise click.UsageError("the dashboard must not listen on the push port (CONSUMER_BIND)")
    service.require_database(serving=True)  # missing or not migrated: one line, before gunicorn
    service.close()  # gunicorn replaces this process: its workers open their own
    command = gunicorn_command(
        settings.dashboard.bind, workers, settings.inbox.ack_deadline_seconds
    )
    # gunicorn replaces this process: a signal to our PID reaches it (no orphaned server).
    os.execvpe(command[0], command, {**os.environ, **env})


@click.command("status")
def status() -> None:
    """The dashboard's overview in the terminal: deliveries, jobs, ticks, files, warm runs."""
    service, now = current_cli().service, utcnow()
    flow = kinds_flow(FlowAdmin(service.engine), service.registry, service.settings, now)
    click.echo(render(overview(service.engine, service.registry, now), flow.values()))


def register(group: click.Group) -> None:
    group.add_command(dashboard)
    group.add_command(status)
