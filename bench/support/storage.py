"""The storage harness: uploads to fake-gcs-server and pushes the matching notification through
the real dispatcher (inbox claim, handler, outcome), and CSV files of e-mail rows to import."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.jobs.schema import jobs
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.storage.handler import StorageHandler
from consumer.storage.model import FileRow
from consumer.storage.store import ProcessedFiles
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import storage_body
from consumer.wire.outcomes import Outcome
from consumer.wire.timeutil import Clock, utcnow
from triggers.local import stack

BUCKET = "uploads"


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


def email_csv(rows: int, start: int = 0) -> bytes:
    lines = ["to,subject,text"] + [
        f"user{n}@example.com,Hello {n},Line for {n}" for n in range(start, start + rows)
    ]
    return ("\n".join(lines) + "\n").encode()
