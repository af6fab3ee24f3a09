"""``consumer deploy runs`` and ``consumer deploy hook`` (added to the main group in
``consumer.cli.main``)."""

from __future__ import annotations

import json
import os
import sys
import time

import click
import requests

from consumer.auth.signature import signed_headers
from consumer.cli.context import CliContext, local_url, pass_cli
from consumer.deploy.store import WarmRuns

TIMEOUT_SECONDS = 120


@click.group()
def deploy() -> None:
    """Deploy hooks and the cache-warm runs they caused."""


@deploy.command("runs")
@click.option("--key", default=None, help="Only this deploy, e.g. deploy:web:v1.4.2.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@pass_cli
def runs(cli: CliContext, key: str | None, limit: int) -> None:
    """Recorded warm runs, newest first (or one deploy's, in order)."""
    store = WarmRuns(cli.engine)
    for run in store.for_key(key) if key else store.recent(limit):
        p50 = "-" if run.p50_ms is None else f"{run.p50_ms:.0f}"
        p95 = "-" if run.p95_ms is None else f"{run.p95_ms:.0f}"
        click.echo(
            f"{run.started_at:%Y-%m-%d %H:%M:%S}  {run.key}  {run.warmer}  ok={run.targets_ok} "
            f"failed={run.targets_failed} not_reached={run.targets_not_reached} "
            f"p50={p50}ms p95={p95}ms duration={run.duration_ms:.0f}ms"
        )


@deploy.command("hook")
@click.argument("service")
@click.argument("release")
@click.option("--environment", default="")
@click.option("--commit", default="")
@click.option(
    "--to",
    "url",
    default=None,
    help="Hook URL (default: /hooks/deploy at CONSUMER_BIND on this host).",
)
@pass_cli
def hook(
    cli: CliContext, service: str, release: str, environment: str, commit: str, url: str | None
) -> None:
    """POST a signed deploy hook. The secret is the first of CONSUMER_DEPLOY_HOOK_SECRETS (the
    server's own setting: the newest during a rotation), else DEPLOY_HOOK_SECRET."""
    secrets = cli.settings.deploy_hook.secrets
    secret = secrets[0] if secrets else os.environ.get("DEPLOY_HOOK_SECRET", "")
    if not secret:
        raise click.UsageError("set CONSUMER_DEPLOY_HOOK_SECRETS (or DEPLOY_HOOK_SECRET)")
    url = url or local_url(cli.settings, "/hooks/deploy")
    fields = {"service": service, "release": release, "environment": environment, "commit": commit}
    body = json.dumps({k: v for k, v in fields.items() if v}).encode()
    headers = {"Content-Type": "application/json"}
    headers.update(signed_headers(secret, int(time.time()), body))
    try:
        response = requests.post(url, data=body, headers=headers, timeout=TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise click.ClickException(f"cannot reach {url}: {exc}") from exc
    click.echo(f"{response.status_code} {response.text.strip()}")
    if response.status_code not in (200, 201, 202, 204):
        sys.exit(1)
