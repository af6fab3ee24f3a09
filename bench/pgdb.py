"""What the PostgreSQL benchmarks share: a throw-away database and the median of timed runs."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

ADMIN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextmanager
def database(prefix: str) -> Iterator[str]:
    """A fresh database named after ``prefix``, dropped afterwards; yields its psycopg conninfo."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{ADMIN.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``run``."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)
