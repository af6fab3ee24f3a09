"""``consumer jobs enqueue KIND --from FILE``: one job per row of a JSON Lines or CSV file.

The rows go through the same path as a bucket import: the same line reader (numbered lines,
bounded memory, bad UTF-8 or NUL bytes reported by line), the same row validation (``to`` is
required and addresses are checked for ``email``), and the same set-based insert
(``consumer.jobs.bulk``), a transaction per ``BATCH_ROWS`` rows. Each job's idempotency key is
``PREFIX:LINE``; the prefix defaults to a digest of the file's bytes, so running the same file
twice creates nothing the second time, and says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import click
from sqlalchemy import Engine

from consumer.config.import_options import ImportOptions
from consumer.db.engine import unavailable_on_db_fault
from consumer.errors import SettingsError
from consumer.jobs import wake
from consumer.jobs.bulk import BulkRow, JobTemplate, insert_jobs
from consumer.jobs.fields import producer_fields
from consumer.jobs.model import InvalidJob
from consumer.storage.lines import read_lines
from consumer.storage.rows import FileRejected, Record, csv_header, csv_records, jsonl_records
from consumer.storage.validate import RowRules

BATCH_ROWS = 5000
MAX_ERRORS_SHOWN = 100


@dataclass
class BulkReport:
    """What ``--from`` did, printed as JSON."""

    key_prefix: str
    rows: int = 0
    created: int = 0
    rejected: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return self.rows - self.rejected - self.created

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": "enqueued", "rows": self.rows, "created": self.created,
            "duplicates": self.duplicates, "rejected": self.rejected, "errors": self.errors,
            "key_prefix": self.key_prefix,
        }  # fmt: skip


def enqueue_file(
    engine: Engine, template: JobTemplate, path: Path, file_format: str, key_prefix: str | None
) -> BulkReport:
    """Enqueue every valid row of ``path``; raise ``InvalidJob`` if the file cannot be read
    as ``file_format`` at all (no header, for instance)."""
    row_payload = RowRules(_options(template), producer_fields(None, template.kind)).payload
    fmt = file_format if file_format != "auto" else _format_of(path)
    report = BulkReport(key_prefix or f"file:{_digest(path)}")
    with path.open("rb") as stream:
        batch: list[BulkRow] = []
        for record in _records(stream, fmt):
            if record.blank:
                continue
            report.rows += 1
            payload, problem = row_payload(record.fields) if not record.problem \
                else ("", record.problem)  # fmt: skip
            if problem:
                _reject(report, record.line, problem)
                continue
            batch.append((f"{report.key_prefix}:{record.line}", payload))
            if len(batch) >= BATCH_ROWS:
                report.created += _insert(engine, template, batch)
                batch = []
        report.created += _insert(engine, template, batch)
    return report


def _options(template: JobTemplate) -> ImportOptions:
    try:
        return ImportOptions.parse({"kind": template.kind})
    except SettingsError as exc:
        raise InvalidJob(str(exc)) from exc


def _format_of(path: Path) -> str:
    return "csv" if path.suffix.lower() == ".csv" else "jsonl"


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def _records(stream: BinaryIO, fmt: str) -> Iterator[Record]:
    lines = read_lines(stream)
    if fmt == "jsonl":
        return jsonl_records(lines)
    try:
        header = csv_header(lines)
    except FileRejected as exc:
        raise InvalidJob(f"cannot read the CSV file: {exc}") from exc
    return csv_records(lines, header)


def _reject(report: BulkReport, line: int, problem: str) -> None:
    report.rejected += 1
    if len(report.errors) < MAX_ERRORS_SHOWN:
        report.errors.append({"line": line, "error": problem})


def _insert(engine: Engine, template: JobTemplate, batch: list[BulkRow]) -> int:
    if not batch:
        return 0
    with unavailable_on_db_fault(), engine.begin() as connection:
        inserted = insert_jobs(connection, template, batch)
    if inserted:
        wake.committed(engine)
    return inserted


def enqueue_file_command(
    engine: Callable[[], Engine],
    payload: Any,
    key: str | None,
    kind: str,
    run_at: datetime | None,
    priority: int,
    max_attempts: int | None,
    path: str,
    file_format: str,
    key_prefix: str | None,
) -> int:
    """The body of ``jobs enqueue --from``: print the report as JSON; the exit status is 1
    when any row was rejected."""
    if payload != {} or key is not None:
        raise click.UsageError(
            "--from takes the payloads from the file: not with --payload or --key"
        )
    try:
        template = JobTemplate(kind, priority, max_attempts, run_at)
        report = enqueue_file(engine(), template, Path(path), file_format, key_prefix)
    except InvalidJob as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(report.as_json()))
    return 1 if report.rejected else 0
