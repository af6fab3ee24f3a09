"""The ``consumer`` command. Every option also reads a ``CONSUMER_*`` variable (Settings).

Each command gets the shared ``CliContext`` (settings, engine, registry; ``@pass_cli``) and runs
inside one error boundary (``ConsumerGroup``): mistakes end in one line, not a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click
import requests

from consumer import __version__
from consumer.cli import dashboard as dashboard_cli
from consumer.cli import demo as demo_cli
from consumer.cli import deploy as deploy_cli
from consumer.cli import files as storage_cli
from consumer.cli import jobs as jobs_cli
from consumer.cli.context import (
    CliContext,
    as_env,
    current_cli,
    load_settings,
    load_with_plugins,
    local_url,
    open_engine,
    pass_cli,
)
from consumer.cli.errors import ConsumerGroup
from consumer.inbox.model import Status
from consumer.wire import envelopes_out

__all__ = ["as_env", "load_settings", "main"]  # load_settings lives in consumer.cli.context
TIMEOUT_SECONDS = 30


@click.group(cls=ConsumerGroup)
@click.version_option(__version__, prog_name="consumer")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Exactly-once consumer for Pub/Sub push: ticks, storage uploads, deploy hooks."""
    cli = ctx.ensure_object(CliContext)
    ctx.call_on_close(cli.close)


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
@click.option(
    "--log-format",
    type=click.Choice(["auto", "json", "text"]),
    default=None,
    help="Log lines (CONSUMER_LOG_FORMAT; auto: text in a terminal, else JSON).",
)
def serve(
    local: bool,
    bind: str | None,
    workers: int | None,
    tick_seconds: int | None,
    log_format: str | None,
) -> None:
    """Run the service under gunicorn (migrating first in local mode)."""
    from consumer.http.serve import run

    overrides: dict[str, Any] = {"bind": bind, "workers": workers, "log_format": log_format}
    if local:
        from_env = os.environ.get("CONSUMER_LOCAL_TICK_SECONDS", "10")
        seconds = from_env if tick_seconds is None else str(tick_seconds)
        overrides.update(local_mode="true", local_tick_seconds=seconds)
        if seconds.strip() != "0" and "CONSUMER_TICK_PERIODS" not in os.environ:
            # Each local tick gets its own sweep slot, so enqueued jobs go out within seconds.
            overrides["tick_periods"] = f"sweep={seconds}"
    run(lambda: load_with_plugins(serves_push=True, **overrides), as_env(overrides))


@main.command("settings")
def settings_reference() -> None:
    """Print the configuration reference (every CONSUMER_* variable) as Markdown, with the
    sections of the plugins this environment configures."""
    from consumer.config.doc import markdown_table
    from consumer.plugins import load_configured

    loaded, failure = load_configured(os.environ)
    if failure:
        raise click.UsageError(f"invalid settings: {failure}")
    click.echo(markdown_table(loaded.setting_sections.values() if loaded else ()))


@main.command()
@click.argument("subscription")
@click.option(
    "--max-messages",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Messages in flight at once.",
)
@pass_cli
def pull(cli: CliContext, subscription: str, max_messages: int) -> None:
    """Stream-pull SUBSCRIPTION (projects/P/subscriptions/S) into the same core as /push."""
    from google.auth.exceptions import DefaultCredentialsError

    from consumer.sources.pull import run_pull

    try:
        run_pull(cli.settings, subscription, max_messages)
    except DefaultCredentialsError as exc:
        raise click.ClickException(
            "no Google credentials: run `gcloud auth application-default login`, set "
            "GOOGLE_APPLICATION_CREDENTIALS, or set PUBSUB_EMULATOR_HOST for the emulator"
        ) from exc


@main.group()
def db() -> None:
    """Schema management (run once per release, never in every pod's start-up)."""


@db.command("upgrade")
@pass_cli
def db_upgrade(cli: CliContext) -> None:
    """Apply every pending migration (creating a SQLite file that does not exist yet)."""
    from consumer.db.migrate import upgrade

    url = cli.settings.database_url
    open_engine(url, create=True).dispose()  # a missing driver is one clear line
    upgrade(url)
    click.echo("database is up to date")


@db.command("check")
@pass_cli
def db_check(cli: CliContext) -> None:
    """Check that the migrated schema matches the models (alembic check); exit 1 if not."""
    from alembic import command
    from alembic.util import AutogenerateDiffsDetected

    from consumer.db.migrate import alembic_config

    cli.require_database()  # alembic would create a missing SQLite file
    try:
        command.check(alembic_config(cli.settings.database_url))
    except AutogenerateDiffsDetected as exc:
        raise click.ClickException(f"the schema differs from the models: {exc}") from exc
    click.echo("the schema matches the models")


@main.group()
def send() -> None:
    """Build a real-format push envelope and POST it (a local stand-in for Pub/Sub)."""


def push_url(url: str | None) -> str:
    """``--to``, else CONSUMER_SEND_TO, else /push on this host at the server's bind port."""
    return url or local_url(current_cli().settings, "/push", configured="send_to")


def _post(url: str, body: dict[str, Any], token: str | None) -> None:
    params = {"token": token} if token else None
    try:
        response = requests.post(url, json=body, params=params, timeout=TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from exc
    click.echo(f"{response.status_code} {response.text.strip()}")
    if response.status_code not in (102, 200, 201, 202, 204):
        sys.exit(1)


to_option = click.option(
    "--to",
    "url",
    default=None,
    help="Push endpoint URL (CONSUMER_SEND_TO; default: /push at CONSUMER_BIND on this host).",
)
token_option = click.option("--token", default=None, help="Legacy ?token= value.")


@send.command("tick")
@click.argument("task")
@to_option
@token_option
def send_tick(task: str, url: str, token: str | None) -> None:
    """A Cloud Scheduler tick for TASK."""
    _post(push_url(url), envelopes_out.tick_body(task), token)


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
    body = envelopes_out.storage_body(bucket, name, generation, event_type)
    _post(push_url(url), body, token)


@send.command("deploy")
@click.argument("service")
@click.argument("release")
@click.option("--environment", default="")
@to_option
@token_option
def send_deploy(service: str, release: str, environment: str, url: str, token: str | None) -> None:
    """A deploy announcement for SERVICE at RELEASE."""
    _post(push_url(url), envelopes_out.deploy_body(service, release, environment), token)


@main.group()
def inbox() -> None:
    """Inspect and replay inbox rows."""


def _inbox(cli: CliContext) -> Any:
    from consumer.inbox.store import Inbox

    return Inbox(cli.engine)


@inbox.command("list")
@click.option("--status", type=click.Choice([status.value for status in Status]), default=None)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@pass_cli
def inbox_list(cli: CliContext, status: str | None, limit: int) -> None:
    """Most recently updated rows first."""
    for row in _inbox(cli).list(Status(status) if status else None, limit):
        click.echo(
            f"{row.updated_at:%Y-%m-%d %H:%M:%S}  {row.status:<10}  {row.attempts:>2}  {row.key}"
        )


@inbox.command("show")
@click.argument("key")
@pass_cli
def inbox_show(cli: CliContext, key: str) -> None:
    """One row in full, with its stored message."""
    row = _inbox(cli).get(key)
    if row is None:
        raise click.ClickException(f"no inbox row {key!r}")
    click.echo(json.dumps(vars(row), default=str, indent=2))


@inbox.command("replay")
@click.argument("key")
@pass_cli
def inbox_replay(cli: CliContext, key: str) -> None:
    """Run a dead, unroutable or failed event again, in this process, with fresh attempts."""
    from consumer.sources.replay import replay

    cli.require_database()  # replay opens its own engine, which would create a missing file
    outcome = replay(cli.settings, key)
    click.echo(json.dumps(outcome.body(), default=str))
    if outcome.http_status != 200:
        sys.exit(1)


main.add_command(jobs_cli.jobs)
main.add_command(jobs_cli.sweep_command)
main.add_command(deploy_cli.deploy)
main.add_command(storage_cli.files)
main.add_command(demo_cli.demo)
dashboard_cli.register(main)
