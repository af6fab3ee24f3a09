"""Whether a table is partitioned: PostgreSQL's inbox by week (migration ``0015``) and jobs by
epoch (``0016``); SQLite's never are. Asked once per engine and table, as a schema only moves
forward while we run."""

from __future__ import annotations

import weakref

from sqlalchemy import Engine, text

from consumer.db import dialect as sql

RELKIND = text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:name)")
_KNOWN: weakref.WeakKeyDictionary[Engine, dict[str, bool]] = weakref.WeakKeyDictionary()


def partitioned(engine: Engine, table: str) -> bool:
    known = _KNOWN.setdefault(engine, {})
    if table not in known:
        known[table] = engine.dialect.name == sql.POSTGRESQL and _relkind(engine, table) == "p"
    return known[table]


def _relkind(engine: Engine, table: str) -> str | None:
    with engine.connect() as connection:
        return connection.execute(RELKIND, {"name": table}).scalar()
