"""One file's trip for ``bench/storage_bench.py``: a fresh migrated database, an app under
gunicorn behind a Pub/Sub emulator push subscription, the upload to fake-gcs-server that starts
the clock, and the wait for the app's recorded finish; timed, its CPU read, and its seconds
broken into parts.

The parts, each from the clock of the process that saw it (one machine, one wall clock):
  upload     the upload call, in the bench (``upload_from_string`` returned);
  notify     to the notification's ``publishTime`` (fake-gcs-server publishing to the emulator);
  push       to the push reaching the app (the service: its inbox claim, ``inbox.created_at``;
             the floor: the request's arrival);
  to handler the service: to its ``processed_files`` row begun (the object's metadata read);
  handler    the service: the file's ``duration_ms`` (download, checksum, read, write);
  download   the floor: the download; rows: then its ``COPY``, ``INSERT`` and commit;
  record     to the recorded finish (``finished_at``), where the clock stops;
  poll       after the clock: until the bench's poll (every ``POLL_SECONDS``) saw it.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

import psycopg
from sqlalchemy import Engine, text

from bench.import_floor_app import FILES, FILES_COLUMNS
from bench.support.aged_epochs import age
from bench.support.cpu import backends, cpu_seconds
from bench.support.import_cpu import E2E, booted, cpu_of
from bench.support.postgres import PG_ADMIN_DSN, conninfo_of, migrated_postgres_database
from bench.support.serving import Server, settings_env
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.storage.model import FINAL
from consumer.storage.store import ProcessedFiles
from consumer.wire.timeutil import parse_rfc3339
from triggers.local import stack

PROJECT, TOPIC = "local", "gcs-notifications"
WORKERS = 2
POLLER = "storage-bench-poll"
"""The ``application_name`` of the bench's own polling connection, left out of the CPU."""
POLL_SECONDS = 0.05
FLOOR_APP = "bench.import_floor_app:app()"
T = TypeVar("T")


@contextmanager
def fresh_database() -> Iterator[str]:
    """A fresh migrated database, aged (``aged_epochs``), with the same-trip floor's table; its
    SQLAlchemy URL."""
    with migrated_postgres_database(PG_ADMIN_DSN, prefix="storage_bench") as url:
        age(url)
        with psycopg.connect(conninfo_of(url), autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {FILES} ({FILES_COLUMNS})")
        yield url


class Upload(NamedTuple):
    name: str
    generation: int
    started: datetime
    """Before the upload call: the clock's start."""
    uploaded: datetime


class Landed(NamedTuple):
    """A file the app is done with: when it recorded its finish, its own seconds, and the
    parts up to that finish."""

    finished_at: datetime
    handler: float
    parts: dict[str, float]


Probe = Callable[[Engine, str, Upload], Landed | None]
"""The app's recorded finish of an upload to a bucket, or ``None`` while there is none."""


def trip(
    data: bytes, bucket: str, emulators: tuple[str, str], app: str, probe: Probe, rules: str,
    **env_extra: str,
) -> E2E:  # fmt: skip
    """One file through the emulators and ``app`` under gunicorn, timed and its CPU read."""
    pubsub_host, gcs_url = emulators
    with fresh_database() as url, tempfile.TemporaryDirectory() as metrics:
        conninfo = conninfo_of(url)
        env = settings_env(Settings(database_url=url, local_mode=True),
                           CONSUMER_STORAGE_RULES=rules, STORAGE_EMULATOR_HOST=gcs_url,
                           PROMETHEUS_MULTIPROC_DIR=metrics, IMPORT_FLOOR_CONNINFO=conninfo,
                           **env_extra)  # fmt: skip
        server = Server(env, workers=WORKERS, app=app)
        subscription = stack.ensure_push_subscription(
            pubsub_host, PROJECT, f"bench-{uuid.uuid4().hex[:8]}", TOPIC, f"{server.url}/push"
        )
        engine = make_engine(f"{url}?application_name={POLLER}")
        try:
            name = f"e2e-{uuid.uuid4().hex}.csv"
            workers = booted(server.process.pid, WORKERS)
            before = cpu_seconds(workers), cpu_seconds(backends(conninfo, but=POLLER))
            started = datetime.now(UTC)
            blob = stack.storage_client(gcs_url).bucket(bucket).blob(name)
            blob.upload_from_string(data, content_type="text/csv")
            upload = Upload(name, int(blob.generation), started, datetime.now(UTC))
            landed = _wait(lambda: probe(engine, bucket, upload))
            seen = datetime.now(UTC)
            after = cpu_seconds(workers), cpu_seconds(backends(conninfo, but=POLLER))
            parts = {"upload": _seconds(started, upload.uploaded), **landed.parts}
            parts["poll"] = _seconds(landed.finished_at, seen)
            seconds = _seconds(started, landed.finished_at)
            return E2E(seconds, landed.handler, *cpu_of(conninfo, before, after), parts)
        finally:
            stack.subscriber(pubsub_host).delete_subscription(subscription=subscription)
            server.stop()
            engine.dispose()


def imported(rows: int) -> Probe:
    """The service's probe: its file final with ``rows`` accepted, and its inbox row."""

    def probe(engine: Engine, bucket: str, upload: Upload) -> Landed | None:
        row = ProcessedFiles(engine).get(bucket, upload.name, upload.generation)
        if row is None or row.status not in FINAL:
            return None
        assert row.progress.rows_accepted == rows, row
        assert row.finished_at is not None
        with engine.connect() as connection:
            claimed, message = connection.execute(
                text("SELECT created_at, message FROM inbox WHERE route = 'storage'")
            ).one()
        handler = row.progress.duration_ms / 1000
        marks = [upload.uploaded, parse_rfc3339(message["publishTime"]), claimed, row.started_at]
        parts = _between(("notify", "push", "to handler"), marks)
        parts["handler"] = handler
        parts["record"] = _seconds(row.started_at, row.finished_at) - handler
        return Landed(row.finished_at, handler, parts)

    return probe


def floor_landed(rows: int) -> Probe:
    """The same-trip floor's probe: its row of ``FILES``."""

    def probe(engine: Engine, bucket: str, upload: Upload) -> Landed | None:
        query = text(
            f"SELECT rows, published_at, arrived_at, downloaded_at, finished_at FROM {FILES} "
            "WHERE bucket = :bucket AND name = :name AND generation = :generation"
        )
        keys = {"bucket": bucket, "name": upload.name, "generation": upload.generation}
        with engine.connect() as connection:
            found = connection.execute(query, keys).first()
        if found is None:
            return None
        count, *marks = found
        assert count == rows, found
        parts = _between(("notify", "push", "download", "rows"), [upload.uploaded, *marks])
        return Landed(marks[-1], _seconds(marks[-2], marks[-1]), parts)

    return probe


def parts_line(runs: dict[str, list[E2E]]) -> str:
    """Each trip's parts in seconds, medians of the runs (so they need not add up to the
    median of the whole)."""

    def parts(label: str, trips: list[E2E]) -> str:
        medians = {
            name: statistics.median(run.parts[name] for run in trips) for name in trips[0].parts
        }
        return f"{label} " + " ".join(f"{name} {value:.3f}" for name, value in medians.items())

    return "seconds: " + "; ".join(parts(label, trips) for label, trips in runs.items())


def _between(names: tuple[str, ...], marks: list[Any]) -> dict[str, float]:
    return {name: _seconds(a, b) for name, a, b in zip(names, marks[:-1], marks[1:], strict=True)}


def _seconds(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds()


def _wait(probe: Callable[[], T | None], timeout: float = 300) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(POLL_SECONDS)
    raise TimeoutError("the file was not finished in time")
