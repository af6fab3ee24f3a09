"""Which rows a claim takes (``queries.claim``): up to ``limit`` of the expired leases, then of
the due jobs, locked on PostgreSQL, under SQLite's single writer on SQLite; the condition that
names them in the claim's ``UPDATE``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select

from consumer.jobs.schema import jobs


def picked_postgresql(expired: Select[Any], due: Select[Any], limit: Any) -> Any:
    """Materialized CTEs lock their rows with SKIP LOCKED: concurrent sweepers take disjoint
    batches without waiting. The union is read lazily, so at most ``limit`` rows are locked.

    The update finds the picked rows by ``id = ANY(ARRAY(...))`` of their ids, not by a join:
    over the table's partitions (migration ``0016_jobs_epochs``) the planner costed a join's
    probes of every partition above a hash join, and its plan read every pending job of the
    current epoch (17,100 of them) for a claim of a hundred. It names no epoch, so a pod on this
    code sweeps while the migration runs. ``limit``: the bind parameter of the claim's size."""
    expired_cte, due_cte = (
        query.limit(limit).with_for_update(skip_locked=True).cte(name).prefix_with("MATERIALIZED")
        for name, query in (("expired", expired), ("due", due))
    )
    picked = select(expired_cte.c.id).union_all(select(due_cte.c.id)).limit(limit).cte("picked")
    return jobs.c.id == func.any(func.array(select(picked.c.id).scalar_subquery()))


def picked_sqlite(expired: Select[Any], due: Select[Any], limit: Any) -> Any:
    """SQLite has one writer (the engine begins IMMEDIATE): select and update are atomic."""
    first, then = expired.limit(limit).subquery(), due.limit(limit).subquery()
    return jobs.c.id.in_(select(first.c.id).union_all(select(then.c.id)).limit(limit))
