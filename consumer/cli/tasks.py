"""``consumer tasks ...``: list the tick tasks, pause, resume and run them now (added to the main
group in consumer.cli.main). Each action is logged with its author: ``--by``, else the OS user."""

from __future__ import annotations

import getpass
import json
import sys
from datetime import datetime

import click

from consumer.cli.context import current_cli
from consumer.observe.logs import configure_logging
from consumer.ticks import controls

by_option = click.option(
    "--by", default=None, help="Who does it, for the log line (default: the OS user)."
)


def _who(by: str | None) -> str:
    return by or getpass.getuser()


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


@click.group()
def tasks() -> None:
    """List, pause, resume and run tick tasks now."""
    log = current_cli().settings.logging  # each action's line, as the service writes its own
    configure_logging(log.level, log.format, log.project_id)


@tasks.command("list")
def list_tasks() -> None:
    """Each task: schedule, overlap and catch-up policies, last completed slot, pause."""
    service = current_cli().service
    service.require_database()
    click.echo(f"{'task':<16}{'schedule':<24}{'overlap':<8}{'catch-up':<10}{'last slot':<22}paused")
    for task in controls.task_states(service):
        last = _when(task.last_slot) if task.last_slot else "never"
        pause = task.pause
        paused = f"since {_when(pause.paused_at)} by {pause.paused_by}" if pause else "no"
        if pause and pause.reason:
            paused += f": {pause.reason}"
        click.echo(
            f"{task.name:<16}{task.schedule:<24}{task.policy.overlap:<8}"
            f"{task.policy.catch_up!s:<10}{last:<22}{paused}"
        )


@tasks.command("pause")
@click.argument("name")
@click.option("--reason", default="", help="Why, shown with the pause.")
@by_option
def pause(name: str, reason: str, by: str | None) -> None:
    """Pause NAME on every pod: its ticks are recorded skipped (reason "paused")."""
    click.echo(controls.pause(current_cli().service, name, _who(by), reason))


@tasks.command("resume")
@click.argument("name")
@by_option
def resume(name: str, by: str | None) -> None:
    """Resume NAME: its next tick runs."""
    click.echo(controls.resume(current_cli().service, name, _who(by)))


@tasks.command("run")
@click.argument("name")
@click.option("--id", "run_id", default="", help="The run's id (again: a duplicate, not a run).")
@by_option
def run(name: str, run_id: str, by: str | None) -> None:
    """Run NAME now, in this process, under a key of its own; exit 1 unless it ran or was a
    duplicate (paused, waiting for a run still going, failed)."""
    service = current_cli().service
    service.require_database()
    outcome = controls.run_now(service, name, _who(by), run_id)
    click.echo(json.dumps(outcome.body(), default=str))
    if outcome.kind.value not in ("done", "duplicate"):
        sys.exit(1)
