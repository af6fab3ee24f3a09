"""The command line's one error boundary: a ``ConsumerError`` or a database fault becomes one line
on stderr (the cause, and the fix when we know it) and a non-zero exit, never a traceback.

Bugs (any other exception) still print their traceback: hiding them would hide the fix.
"""

from __future__ import annotations

from typing import Any

import click
from sqlalchemy.exc import DBAPIError

from consumer.cli.context import CliContext, safe_url
from consumer.errors import ConsumerError, Unavailable

UPGRADE = "run `consumer db upgrade`"
UNDEFINED_OBJECT_SQLSTATES = ("42P01", "42703")  # undefined table, undefined column


class ConsumerGroup(click.Group):
    """The top-level group: every command runs inside its boundary."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConsumerError, DBAPIError) as exc:
            cli = ctx.obj if isinstance(ctx.obj, CliContext) else None
            raise click.ClickException(explain(exc, cli)) from exc


def explain(exc: BaseException, cli: CliContext | None) -> str:
    """One line: what went wrong and, when known, what to do."""
    cause = exc.__cause__ if isinstance(exc, Unavailable) else None
    if isinstance(cause, DBAPIError):
        exc = cause  # "database unavailable" alone hides the real cause
    if isinstance(exc, DBAPIError):
        return _database_fault(exc, cli)
    return first_line(str(exc)) or type(exc).__name__


def _database_fault(exc: DBAPIError, cli: CliContext | None) -> str:
    cause = first_line(str(exc.orig)) or type(exc.orig).__name__
    url = cli.database_url if cli is not None else None
    where = safe_url(url) if url else "the database"
    code = str(getattr(exc.orig, "sqlstate", "") or "")
    if "no such table" in cause or code in UNDEFINED_OBJECT_SQLSTATES:
        return f"the database {where} is not migrated ({cause}): {UPGRADE}"
    if exc.connection_invalidated or _is_connect_failure(exc):
        hint = f": create it, then {UPGRADE}" if "does not exist" in cause else ""
        return f"cannot use the database {where}: {cause}{hint}"
    if _behind(cli):
        return f"the database {where} is not migrated ({cause}): {UPGRADE}"
    kind = type(exc.orig).__name__ + (f", SQLSTATE {code}" if code else "")
    return f"database error ({kind}): {cause}"


def _is_connect_failure(exc: DBAPIError) -> bool:
    """A fault before any statement ran (refused, unknown host, no such database)."""
    return exc.statement is None or "connection" in str(exc.orig).lower()


def _behind(cli: CliContext | None) -> bool:
    """Whether the schema is known to be behind the code (best effort: we are already failing)."""
    if cli is None or not cli.has_engine:
        return False
    from consumer.db.migrate import schema_at_head

    try:
        with cli.engine.connect() as connection:
            return not schema_at_head(cli.engine, connection)
    except Exception:
        return False


def first_line(text: str) -> str:
    """Drivers append SQL, parameters and hints on later lines; one line is the cause."""
    return text.strip().splitlines()[0].strip() if text.strip() else ""
