"""``consumer files ...``: the processed-files record and the processing rules (added to the main
group in consumer.cli.main)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

import click

from consumer.cli.context import current_cli
from consumer.config.storage_rules import load_rules
from consumer.storage.model import FileStatus
from consumer.storage.store import ProcessedFiles

FILE_URL = re.compile(r"gs://(?P<bucket>[^/]+)/(?P<name>.+)#(?P<generation>\d+)")


def _files() -> ProcessedFiles:
    return ProcessedFiles(current_cli().engine)


@click.group()
def files() -> None:
    """Processed uploads (one row per object generation) and the processing rules."""


@files.command("list")
@click.option("--status", type=click.Choice([status.value for status in FileStatus]))
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
def files_list(status: str | None, limit: int) -> None:
    """Most recently updated first."""
    rows = _files().list(FileStatus(status) if status else None, limit)
    for row in rows:
        progress = row.progress
        click.echo(
            f"{row.updated_at:%Y-%m-%d %H:%M:%S}  {row.status:<8}  "
            f"{progress.rows_accepted:>8} ok {progress.rows_rejected:>6} bad  "
            f"gs://{row.bucket}/{row.name}#{row.generation}"
        )


@files.command("show")
@click.argument("url")
def files_show(url: str) -> None:
    """One file in full, with its rejected rows: URL is gs://BUCKET/NAME#GENERATION."""
    match = FILE_URL.fullmatch(url)
    if match is None:
        raise click.BadParameter("expected gs://BUCKET/NAME#GENERATION", param_hint="URL")
    row = _files().get(match["bucket"], match["name"], int(match["generation"]))
    if row is None:
        raise click.ClickException(f"no processed file {url}")
    record = {**asdict(row), "progress": asdict(row.progress)}
    click.echo(json.dumps(record, default=str, indent=2))


@files.command("rules")
def files_rules() -> None:
    """Check CONSUMER_STORAGE_RULES and print them, with the processors they may name; exit
    non-zero when a rule names a processor that is not registered."""
    cli = current_cli()
    known = cli.registry.processors.names()
    missing = []
    for number, rule in enumerate(load_rules(cli.settings.storage.rules).rules, 1):
        flag = "" if rule.processor in known else "   <- NOT REGISTERED"
        if flag:
            missing.append(rule.processor)
        conditions = {
            k: v for k, v in asdict(rule).items() if v and k not in ("processor", "events")
        }
        events = ",".join(sorted(event.value for event in rule.events))
        click.echo(f"{number}. {rule.processor} on {events} {json.dumps(conditions)}{flag}")
    click.echo(f"processors: {', '.join(known)}")
    if missing:
        names = ", ".join(sorted(set(missing)))
        raise click.ClickException(f"rules name processors that are not registered: {names}")
