"""The ``consumer`` command. Every option also reads a ``CONSUMER_*`` variable (Settings)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
import requests

from consumer import envelopes_out
from consumer.deploy import cli as deploy_cli
from consumer.errors import ConsumerError, SettingsError
from consumer.jobs import cli as jobs_cli
from consumer.settings import Settings
from consumer.storage import cli as storage_cli

TIMEOUT_SECONDS = 30


def load_settings(*, serves_push: bool = False, **overrides: Any) -> Settings:
    """Settings from the environment plus command-line overrides; only ``serve`` needs push
    authentication configured."""
    env = {**os.environ, **as_env(overrides)}
    try:
        return Settings.from_env(env, serves_push=serves_push)
    except SettingsError as exc:
        raise click.UsageError(f"invalid settings: {exc}") from exc


def as_env(overrides: dict[str, Any]) -> dict[str, str]:
    """Command-line options as the ``CONSUMER_*`` variables they stand for."""
    return {f"CONSUMER_{name.upper()}": str(v) for name, v in overrides.items() if v is not None}


@click.group()
def main() -> None:
    """Exactly-once consumer for Pub/Sub push: ticks, storage uploads, deploy hooks."""


@main.command()
@click.option(
    "--local",
    is_flag=True,
    help="Insecure local mode: SQLite default, no push auth, "
    "and a local tick source (sweep and cleanup) unless --tick-seconds 0.",
)
@click.option("--bind", default=None, help="host:port (CONSUMER_BIND, default 127.0.0.1:8080).")
@click.option("--workers", type=int, default=None, help="gunicorn workers (CONSUMER_WORKERS).")
@click.option(
    "--tick-seconds",
    type=int,
    default=None,
    help="Local mode: publish ticks this often (CONSUMER_LOCAL_TICK_SECONDS).",
)
def serve(local: bool, bind: str | None, workers: int | None, tick_seconds: int | None) -> None:
    """Run the service under gunicorn (migrating first in local mode)."""
    from consumer.serve import run

    overrides: dict[str, Any] = {"bind": bind, "workers": workers}
    if local:
        from_env = os.environ.get("CONSUMER_LOCAL_TICK_SECONDS", "10")
        seconds = from_env if tick_seconds is None else str(tick_seconds)
        overrides.update(local_mode="true", local_tick_seconds=seconds)
        if seconds.strip() != "0" and "CONSUMER_TICK_PERIODS" not in os.environ:
            # Each local tick gets its own sweep slot, so enqueued jobs go out within seconds.
            overrides["tick_periods"] = f"sweep={seconds}"
    run(load_settings(serves_push=True, **overrides), as_env(overrides))


@main.command("settings")
def settings_reference() -> None:
    """Print the configuration reference (every CONSUMER_* variable) as Markdown."""
    from consumer.settings_doc import markdown_table

    click.echo(markdown_table())


@main.command()
@click.argument("subscription")
@click.option("--max-messages", default=4, show_default=True, help="Messages in flight at once.")
def pull(subscription: str, max_messages: int) -> None:
    """Stream-pull SUBSCRIPTION (projects/P/subscriptions/S) into the same core as /push."""
    from consumer.pull import run_pull

    run_pull(load_settings(), subscription, max_messages)


@main.group()
def db() -> None:
    """Schema management (run once per release, never in every pod's start-up)."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration."""
    from consumer.db.migrate import upgrade

    settings = load_settings()
    upgrade(settings.database_url)
    click.echo("database is up to date")


@main.group()
def send() -> None:
    """Build a real-format push envelope and POST it (a local stand-in for Pub/Sub)."""


def _post(url: str, body: dict[str, Any], token: str | None) -> None:
    params = {"token": token} if token else None
    try:
        response = requests.post(url, json=body, params=params, timeout=TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from exc
    click.echo(f"{response.status_code} {response.text.strip()}")
    if response.status_code not in (102, 200, 201, 202, 204):
        sys.exit(1)


to_option = click.option("--to", "url", default="http://127.0.0.1:8080/push", show_default=True)
token_option = click.option("--token", default=None, help="Legacy ?token= value.")


@send.command("tick")
@click.argument("task")
@to_option
@token_option
def send_tick(task: str, url: str, token: str | None) -> None:
    """A Cloud Scheduler tick for TASK."""
    _post(url, envelopes_out.tick_body(task), token)


@send.command("storage")
@click.argument("bucket")
@click.argument("name")
@click.option("--generation", default="1", show_default=True)
@click.option("--event-type", default="OBJECT_FINALIZE", show_default=True)
@to_option
@token_option
def send_storage(
    bucket: str, name: str, generation: str, event_type: str, url: str, token: str | None
) -> None:
    """A GCS notification for BUCKET/NAME."""
    _post(url, envelopes_out.storage_body(bucket, name, generation, event_type), token)


@send.command("deploy")
@click.argument("service")
@click.argument("release")
@click.option("--environment", default="")
@to_option
@token_option
def send_deploy(service: str, release: str, environment: str, url: str, token: str | None) -> None:
    """A deploy announcement for SERVICE at RELEASE."""
    _post(url, envelopes_out.deploy_body(service, release, environment), token)


@main.group()
def inbox() -> None:
    """Inspect and replay inbox rows."""


def _inbox() -> Any:
    from consumer.db.engine import make_engine
    from consumer.inbox import Inbox

    return Inbox(make_engine(load_settings().database_url))


@inbox.command("list")
@click.option("--status", default=None, help="running, done, failed, dead, skipped, unroutable")
@click.option("--limit", default=50, show_default=True)
def inbox_list(status: str | None, limit: int) -> None:
    """Most recently updated rows first."""
    from consumer.inbox import Status

    for row in _inbox().list(Status(status) if status else None, limit):
        click.echo(
            f"{row.updated_at:%Y-%m-%d %H:%M:%S}  {row.status:<10}  {row.attempts:>2}  {row.key}"
        )


@inbox.command("show")
@click.argument("key")
def inbox_show(key: str) -> None:
    """One row in full, with its stored message."""
    row = _inbox().get(key)
    if row is None:
        raise click.ClickException(f"no inbox row {key!r}")
    click.echo(json.dumps(vars(row), default=str, indent=2))


@inbox.command("replay")
@click.argument("key")
def inbox_replay(key: str) -> None:
    """Run a dead, unroutable or failed event again, in this process, with fresh attempts."""
    from consumer.replay import replay

    settings = load_settings()
    try:
        outcome = replay(settings, key)
    except ConsumerError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(outcome.body(), default=str))
    if outcome.http_status != 200:
        sys.exit(1)


main.add_command(jobs_cli.jobs)
main.add_command(jobs_cli.sweep_command)
main.add_command(deploy_cli.deploy)
main.add_command(storage_cli.files)
