"""A database blip in the middle of an import costs nothing: the batch commit (its jobs with
their resume point) and the final status are retried with backoff while the budget lasts, so
the delivery that was running finishes the file itself. PostgreSQL is cut by a TCP proxy (the
server untouched); the file is read from a real fake-gcs-server."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, text

from bench.support import storage_plugin as plugin
from bench.support.tcpproxy import TcpProxy
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.pipeline.registry import Registry
from consumer.storage.handler import StorageHandler
from consumer.storage.model import FileStatus
from consumer.storage.reader import ObjectStore
from consumer.storage.store import ProcessedFiles
from consumer.wire.outcomes import Kind, Outcome
from tests.storage.conftest import Harness, email_csv
from triggers.local import stack

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROWS = 3000


@dataclass
class Cut:
    harness: Harness
    direct: Engine
    proxy: TcpProxy


@pytest.fixture
def cut(gcs_url: str, postgres_url: str) -> Iterator[Cut]:
    """A harness whose database connections go through a proxy the test can cut, and a direct
    engine to check the result with."""
    proxy = TcpProxy(5432)
    proxy.start()
    proxied_url = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    bucket = f"blip-{uuid.uuid4().hex[:12]}"
    stack.storage_client(gcs_url).create_bucket(bucket)
    # 30 batches of 100 rows, each commit held 0.1 s: about 3 s of import to cut into.
    rule = {"bucket": bucket, "processor": "slow-import", "options": {"delay": 0.1,
            "batch_rows": 100}}  # fmt: skip
    settings = Settings.of(database_url=proxied_url, local_mode=True,
                        storage_rules=json.dumps([rule]))  # fmt: skip
    engine, direct = make_engine(proxied_url), make_engine(postgres_url)
    registry = Registry()
    plugin.register(registry)  # the handler runs the registry's processors, slow-import among them
    objects = ObjectStore(lambda: stack.storage_client(gcs_url))
    handler = StorageHandler(objects, processors=registry.processors)
    try:
        yield Cut(Harness(gcs_url, settings, engine, handler, bucket), direct, proxy)
    finally:
        proxy.stop()
        engine.dispose()
        direct.dispose()


def committed_rows(direct: Engine, bucket: str, name: str, generation: int) -> int:
    row = ProcessedFiles(direct).get(bucket, name, generation)
    return row.progress.rows_accepted if row else 0


@pytest.mark.parametrize("seconds", [1.5, 5.0])
def test_a_cut_during_an_import_loses_nothing_and_doubles_nothing(cut: Cut, seconds: float) -> None:
    harness = cut.harness
    generation = harness.upload("big.csv", email_csv(ROWS))
    outcomes: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcomes.append(harness.notify("big.csv", generation)))
    worker.start()
    deadline = time.monotonic() + 30
    while committed_rows(cut.direct, harness.bucket, "big.csv", generation) < 500:
        assert time.monotonic() < deadline and worker.is_alive(), outcomes
        time.sleep(0.02)
    cut.proxy.stop()  # mid-import: batches in flight, more to come
    time.sleep(seconds)
    cut.proxy.start()
    worker.join(timeout=120)

    assert not worker.is_alive()
    # The delivery that was running finished the file itself: no 503, no redelivery needed.
    assert outcomes[0].kind is Kind.DONE, outcomes[0].details
    direct = Harness(harness.gcs_url, harness.settings, cut.direct, harness.handler,
                     harness.bucket)  # fmt: skip
    keys = direct.job_keys()
    assert len(keys) == len(set(keys)) == ROWS  # none lost, none twice
    row = direct.file("big.csv", generation)
    assert row.status is FileStatus.DONE
    assert (row.progress.rows_accepted, row.progress.jobs_created) == (ROWS, ROWS)


def rewind(direct: Engine, bucket: str, name: str, generation: int) -> None:
    """What an immediate restart does to commits that had not reached the disk: the file's
    batches are gone, its jobs with them, and its resume point is back at the start."""
    where = {"bucket": bucket, "name": name, "generation": generation}
    with direct.begin() as connection:
        connection.execute(
            text(
                "UPDATE processed_files SET rows_accepted = 0, rows_rejected = 0, "
                "jobs_created = 0, resume_line = 0, resume_offset = 0, errors = NULL "
                "WHERE bucket = :bucket AND name = :name AND generation = :generation"
            ),
            where,
        )
        connection.execute(
            text("DELETE FROM jobs WHERE idempotency_key LIKE :prefix"),
            {"prefix": f"{bucket}/{name}#{generation}:%"},
        )


def test_commits_lost_in_a_crash_are_redone_not_skipped(cut: Cut) -> None:
    """A batch commits without waiting for the disk, so an immediate PostgreSQL restart can lose
    it with its jobs while the import, told it committed, goes on. Stood in for here: with the
    database cut, the file's durable state is rewound. The running delivery must not record the
    file done on top of the lost rows: it ends retryable, and the redelivery imports every row,
    once."""
    harness = cut.harness
    generation = harness.upload("big.csv", email_csv(ROWS))
    outcomes: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcomes.append(harness.notify("big.csv", generation)))
    worker.start()
    deadline = time.monotonic() + 30
    while committed_rows(cut.direct, harness.bucket, "big.csv", generation) < 500:
        assert time.monotonic() < deadline and worker.is_alive(), outcomes
        time.sleep(0.02)
    cut.proxy.stop()
    rewind(cut.direct, harness.bucket, "big.csv", generation)
    cut.proxy.start()
    worker.join(timeout=120)

    assert not worker.is_alive()
    assert outcomes[0].kind is Kind.RETRY, outcomes[0].details
    assert "a commit was lost" in str(outcomes[0].details), outcomes[0].details
    assert harness.notify("big.csv", generation).kind is Kind.DONE  # the redelivery
    direct = Harness(harness.gcs_url, harness.settings, cut.direct, harness.handler,
                     harness.bucket)  # fmt: skip
    keys = direct.job_keys()
    assert len(keys) == len(set(keys)) == ROWS  # none lost, none twice
    row = direct.file("big.csv", generation)
    assert row.status is FileStatus.DONE
    assert (row.progress.rows_accepted, row.progress.jobs_created) == (ROWS, ROWS)
