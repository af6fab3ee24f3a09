"""Every SQL statement on ``warm_runs``, each named once; ``WarmRuns`` runs them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Insert, Select, insert, select

from consumer.deploy.schema import warm_runs


def recorded(values: Mapping[str, Any]) -> Insert:
    """One warmer's run of one release, as a new row."""
    return insert(warm_runs).values(**values)


def for_key(key: str) -> Select[Any]:
    """The runs of one release (its inbox key), oldest first."""
    return select(warm_runs).where(warm_runs.c.key == key).order_by(warm_runs.c.id)


def recent(limit: int) -> Select[Any]:
    """The latest ``limit`` runs, newest first."""
    return select(warm_runs).order_by(warm_runs.c.id.desc()).limit(limit)
