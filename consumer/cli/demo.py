"""``consumer demo``: both acts and the table."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from consumer.demo.acts import Options, after, before, workspace
from consumer.demo.report import table


@click.command()
@click.option("--jobs", "-n", default=1000, show_default=True, help="Emails to enqueue.")
@click.option("--pods", default=3, show_default=True, help="Pods in each act.")
@click.option("--kill/--no-kill", default=True, show_default=True,
              help="SIGKILL one pod mid-sweep in the after act (and restart it).")  # fmt: skip
@click.option("--database", default="sqlite", show_default=True,
              help="sqlite, or a PostgreSQL server URL whose user may create databases "
                   "(each act gets a new database, dropped after it).")  # fmt: skip
@click.option("--emulator/--no-emulator", default=None,
              help="Publish ticks through Google's Pub/Sub emulator "
                   "(default: when installed).")  # fmt: skip
@click.option("--skip-before", is_flag=True, help="Run only the after act.")
@click.option("--workdir", type=click.Path(path_type=Path), default=None,
              help="Keep databases and logs here (default: a temporary directory).")  # fmt: skip
def demo(
    jobs: int, pods: int, kill: bool, database: str, emulator: bool | None, skip_before: bool,
    workdir: Path | None,
) -> None:  # fmt: skip
    """Watch three pods send duplicate emails, then watch them not do it."""
    if jobs < 1 or not 1 <= pods <= 16:
        raise click.BadParameter("--jobs must be at least 1 and --pods 1..16")
    options = Options(jobs=jobs, pods=pods, kill=kill, database=database, emulator=emulator)
    with workspace(workdir) as directory:
        first = None if skip_before else before(options, directory, _progress)
        second = after(options, directory, _progress)
    click.echo(table(first, second))
    if not second.drained or second.tally.lost:
        sys.exit(1)


def _progress(line: str) -> None:
    click.echo(line, err=True)
