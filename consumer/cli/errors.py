"""The command line's one error boundary: a ``ConsumerError`` or a database fault becomes one line
on stderr (the cause, and the fix when we know it), never a traceback. A fault of start-up (a
setting, a plugin, a database that is missing, unreachable or not migrated) exits 2, as every
other entry point does (``consumer.service``); a command's own refusal exits 1.

Bugs (any other exception) still print their traceback: hiding them would hide the fix.
"""

from __future__ import annotations

from typing import Any

import click
from sqlalchemy.exc import DBAPIError

from consumer.cli.context import CliContext
from consumer.errors import ConsumerError, DatabaseFault, SettingsError, Unavailable
from consumer.service import STARTUP_FAILED, explain

STARTUP_FAULTS = (SettingsError, DatabaseFault, Unavailable, DBAPIError)


class StartupFailed(click.ClickException):
    """A command that could not start: click's status for a usage error, as for ``serve``."""

    exit_code = STARTUP_FAILED


class ConsumerGroup(click.Group):
    """The top-level group: every command runs inside its boundary."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConsumerError, DBAPIError) as exc:
            cli = ctx.obj if isinstance(ctx.obj, CliContext) else None
            line = explain(exc, cli.composed if cli is not None else None)
            if isinstance(exc, STARTUP_FAULTS):
                raise StartupFailed(line) from exc
            raise click.ClickException(line) from exc
