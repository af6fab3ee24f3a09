"""Which rows a claim takes (``queries.claim``): up to ``limit`` of the expired leases, then of
the due jobs, locked on PostgreSQL, under SQLite's single writer on SQLite; the condition that
names them in the claim's ``UPDATE``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Select, and_, func, literal_column, select

from consumer.jobs.schema import jobs

job_epoch = literal_column("jobs.epoch", Integer())
"""PostgreSQL's partition key (migration ``0016_jobs_epochs``)."""


def picked_postgresql(expired: Select[Any], due: Select[Any], limit: Any) -> Any:
    """Materialized CTEs lock their rows with SKIP LOCKED: concurrent sweepers take disjoint
    batches without waiting. The union is read lazily, so at most ``limit`` rows are locked.

    The update finds the picked rows by ``id = ANY(ARRAY(...))`` of their ids, in the epochs
    they are in, not by a join: over the table's partitions (migration ``0016_jobs_epochs``)
    the planner costed a join's probes of every partition above a hash join, and its plan read
    every pending job of the current epoch (17,100 of them) for a claim of a hundred.
    ``limit``: the bind parameter of the claim's size."""
    expired_cte, due_cte = (
        query.add_columns(job_epoch.label("epoch")).limit(limit)
        .with_for_update(skip_locked=True).cte(name).prefix_with("MATERIALIZED")
        for name, query in (("expired", expired), ("due", due))
    )  # fmt: skip
    picked = (
        select(expired_cte.c.id, expired_cte.c.epoch)
        .union_all(select(due_cte.c.id, due_cte.c.epoch))
        .limit(limit)
        .cte("picked")
    )
    ids = func.array(select(picked.c.id).scalar_subquery())
    epochs = func.array(select(picked.c.epoch).scalar_subquery())
    return and_(jobs.c.id == func.any(ids), job_epoch == func.any(epochs))


def picked_sqlite(expired: Select[Any], due: Select[Any], limit: Any) -> Any:
    """SQLite has one writer (the engine begins IMMEDIATE): select and update are atomic."""
    first, then = expired.limit(limit).subquery(), due.limit(limit).subquery()
    return jobs.c.id.in_(select(first.c.id).union_all(select(then.c.id)).limit(limit))
