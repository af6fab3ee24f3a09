"""The same-trip floor of ``bench/storage_bench.py``: the least an import does once the same
notification reaches it through the same Pub/Sub emulator push, served by gunicorn like the
service (``bench.import_floor_app:app()``).

``POST /push`` (answered before Flask, as the service's front door answers it): the object the
``OBJECT_FINALIZE`` notification names is downloaded whole (generation pinned, no checksum), its
CSV rows become ``(key of the import's form, payload JSON)`` and are ``COPY``-ed into a stage,
one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` moves them into the migrated ``jobs``
table, one commit; then a row of ``FILES`` records when the push arrived, the download ended and
the rows were committed (its own autocommit statement, as the import records its file after
its last batch). No inbox, no validation, no batches, no progress: what any import must do.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import psycopg
from flask import Flask, jsonify

from consumer.jobs.bulk_queries import EPOCH, KEYS_CHECKED, not_in_earlier_epochs
from triggers.local import stack

FILES = "import_floor_files"
FILES_COLUMNS = (
    "bucket text, name text, generation bigint, rows int, published_at timestamptz, "
    "arrived_at timestamptz, downloaded_at timestamptz, finished_at timestamptz, "
    "PRIMARY KEY (bucket, name, generation)"
)
RECORD = (
    f"INSERT INTO {FILES} (bucket, name, generation, rows, published_at, arrived_at, "
    "downloaded_at, finished_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
FLOOR_STATEMENTS = (
    "CREATE TEMPORARY TABLE jobs_stage (idempotency_key text, payload text) ON COMMIT DROP; "
    + KEYS_CHECKED.format("on"),
    "COPY jobs_stage (idempotency_key, payload) FROM STDIN",
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts, "
    "idempotency_key, created_at, updated_at, epoch) SELECT 'email', payload::json, 'pending', "
    f"0, now(), 0, NULL, idempotency_key, now(), now(), {EPOCH} FROM jobs_stage "
    f"WHERE {not_in_earlier_epochs('jobs_stage.idempotency_key')} ON CONFLICT DO NOTHING",
)
"""The floor's statements, in both floors: the stage, its ``COPY``, the move into ``jobs``. On
the jobs table by epoch a correct move looks each key up in the earlier epochs: the floor does it
as the cheapest way does, set-based with the per-row trigger held off (as the import does)."""


def app() -> Flask:
    """One psycopg connection and one storage client per thread, made on the first push (after
    gunicorn forks)."""
    flask_app = Flask("import-floor")
    flask_app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    conninfo, gcs_url = os.environ["IMPORT_FLOOR_CONNINFO"], os.environ["STORAGE_EMULATOR_HOST"]
    local = threading.local()
    flask_wsgi = flask_app.wsgi_app

    def push(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/push" or environ.get("REQUEST_METHOD") != "POST":
            return flask_wsgi(environ, start_response)
        arrived = datetime.now(UTC)
        if getattr(local, "connection", None) is None:
            local.connection = psycopg.connect(conninfo, autocommit=True)
            local.client = stack.storage_client(gcs_url)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        message = json.loads(environ["wsgi.input"].read(length) or b"{}").get("message", {})
        attributes = message.get("attributes") or {}
        rows = 0
        if attributes.get("eventType") == "OBJECT_FINALIZE":
            rows = _import(local.connection, local.client, attributes, message, arrived)
        body = json.dumps({"rows": rows}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("200 OK", headers)
        return [body]

    flask_app.wsgi_app = push  # type: ignore[method-assign]
    return flask_app


def _import(
    connection: psycopg.Connection[Any],
    client: Any,
    attributes: dict[str, str],
    message: dict[str, Any],
    arrived: datetime,
) -> int:
    bucket, name = attributes["bucketId"], attributes["objectId"]
    generation = int(attributes["objectGeneration"])
    blob = client.bucket(bucket).blob(name, generation=generation)
    data = blob.download_as_bytes(raw_download=True, checksum=None)
    downloaded = datetime.now(UTC)
    rows = copy_rows(connection, f"{bucket}/{name}#{generation}:", data)
    published = message.get("publishTime") or message.get("publish_time")
    record = (bucket, name, generation, rows, published, arrived, downloaded, datetime.now(UTC))
    connection.execute(RECORD, record)
    return rows


def copy_rows(connection: psycopg.Connection[Any], prefix: str, data: bytes) -> int:
    """The CSV's rows (header first) into ``jobs``, keyed ``prefix`` + line number, in one
    transaction; how many were inserted."""
    create, copy_in, move = FLOOR_STATEMENTS
    records = csv.reader(io.StringIO(data.decode()))
    header = next(records)
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(create)
        with cursor.copy(copy_in) as copy:
            for line, fields in enumerate(records, 2):
                payload = json.dumps(dict(zip(header, fields, strict=True)))
                copy.write_row((f"{prefix}{line}", payload))
        cursor.execute(move)
        return cursor.rowcount
