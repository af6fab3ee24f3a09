"""Opening the configured database at start-up, and saying in one line why it cannot be used.

Every entry point opens its engine through ``open_engine`` (``consumer.service``) and explains a
database fault with ``explain_fault``: the server, the dashboard and every command fail the same
way, naming the cause and the fix.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from consumer.config.database import DatabaseWaits
from consumer.config.settings import DEFAULT_DATABASE_URL, redacted_url
from consumer.db.engine import make_engine
from consumer.db.migrate import schema_at_head
from consumer.errors import DatabaseFault

UPGRADE = "run `consumer db upgrade`"
UNDEFINED_OBJECT_SQLSTATES = ("42P01", "42703")  # undefined table, undefined column


def open_engine(url: str, *, create: bool = False, waits: DatabaseWaits | None = None) -> Engine:
    """An engine for ``url``, refusing (with the fix) a driver that is not installed and, unless
    ``create``, a SQLite file that does not exist: connecting would create an empty one.
    ``waits``: the bounds of every database wait (``make_engine``)."""
    if not create:
        _require_sqlite_file(url)
    try:
        return make_engine(url, waits)
    except (ArgumentError, ImportError) as exc:
        raise DatabaseFault(
            f"CONSUMER_DATABASE_URL {redacted_url(url)}: no such database driver ({exc}); "
            "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from exc


def _require_sqlite_file(url: str) -> None:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # make_engine reports it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    path = Path(parsed.database or "").resolve()
    if not path.exists():
        relative = " (the default is relative to the working directory)"
        raise DatabaseFault(
            f"no database at {path}{relative if url == DEFAULT_DATABASE_URL else ''}: "
            f"set CONSUMER_DATABASE_URL, or {UPGRADE} to create it"
        )


def explain_fault(exc: DBAPIError, url: str | None, engine: Engine | None = None) -> str:
    """One line for a driver's error: unreachable, missing, not migrated, or what it said."""
    cause = first_line(str(exc.orig)) or type(exc.orig).__name__
    where = redacted_url(url) if url else "the database"
    code = str(getattr(exc.orig, "sqlstate", "") or "")
    if "no such table" in cause or code in UNDEFINED_OBJECT_SQLSTATES:
        return f"the database {where} is not migrated ({cause}): {UPGRADE}"
    if exc.connection_invalidated or _is_connect_failure(exc):
        hint = f": create it, then {UPGRADE}" if "does not exist" in cause else ""
        return f"cannot use the database {where}: {cause}{hint}"
    if engine is not None and _behind(engine):
        return f"the database {where} is not migrated ({cause}): {UPGRADE}"
    kind = type(exc.orig).__name__ + (f", SQLSTATE {code}" if code else "")
    return f"database error ({kind}): {cause}"


def _is_connect_failure(exc: DBAPIError) -> bool:
    """A fault before any statement ran (refused, unknown host, no such database)."""
    return exc.statement is None or "connection" in str(exc.orig).lower()


def _behind(engine: Engine) -> bool:
    """Whether the schema is known to be behind the code (best effort: we are already failing)."""
    try:
        with engine.connect() as connection:
            return not schema_at_head(engine, connection)
    except Exception:  # any fault here: the original error is the one to report
        return False


def first_line(text: str) -> str:
    """Drivers append SQL, parameters and hints on later lines; one line is the cause."""
    return text.strip().splitlines()[0].strip() if text.strip() else ""
