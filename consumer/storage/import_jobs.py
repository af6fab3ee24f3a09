"""Built-in processor ``import-jobs``: each row of a CSV (with a header row) or JSON Lines file
becomes a job.

Rows are validated; a rejected row is reported by line number and reason and the rest go on. The
job's idempotency key is ``bucket/object#generation:line``, so a second run over the same
generation creates nothing new. Jobs are added in batches, each committed together with the
progress it represents, so a retry (or a run stopped by its time budget) resumes after the last
committed row instead of starting over. A batch ends at ``batch_rows`` rows (the first ones
smaller, see ``FIRST_BATCH_ROWS``) or ``BATCH_BYTES`` of payload (memory stays flat however wide
the rows), and a stretch of blank lines is committed as progress every
``BLANK_CHECKPOINT_SECONDS``, so a file that is mostly empty moves forward on every attempt
instead of spending its budget re-reading the same blank lines.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator

from sqlalchemy import Connection

from consumer.config.import_options import ImportOptions
from consumer.jobs import wake
from consumer.jobs.bulk import BulkBatch, JobTemplate, insert_batch
from consumer.jobs.fields import producer_fields
from consumer.pipeline.extensions import Functions
from consumer.storage.lines import read_lines
from consumer.storage.model import FileResult, FileStatus, Progress
from consumer.storage.overlap import Overlapped
from consumer.storage.processors import FileInput, Processor
from consumer.storage.reader import UnreadableContent
from consumer.storage.rows import (
    EmptyFile,
    FileRejected,
    Record,
    csv_header,
    csv_records,
    jsonl_records,
)
from consumer.storage.validate import RowRules

BATCH_BYTES = 4 << 20
FIRST_BATCH_ROWS = 500
YIELD_EVERY_ROWS = 128
"""The reader offers the GIL this often: the writer thread, back from the database, would
otherwise wait for Python's switch interval (5 ms) at each of its statements."""
BLANK_CHECKPOINT_SECONDS = 0.25


def importer(kinds: Functions) -> Processor:
    """The ``import-jobs`` processor for a registry's job kinds (whose declared fields filter
    the rows: ``consumer.jobs.fields``)."""
    return functools.partial(import_jobs, kinds=kinds)


def import_jobs(file: FileInput, kinds: Functions | None = None) -> FileResult:
    """The ``import-jobs`` processor; without ``kinds``, rows are filtered by the built-in
    kinds' declarations."""
    options = ImportOptions.parse(file.options)
    file_format = options.format_for(file.object)
    details = {"format": file_format, "kind": options.kind}
    try:
        records = _records(file, file_format)
        allowed = producer_fields(kinds, options.kind)
        progress = _Importer(file, options, allowed).run(records)
    except EmptyFile as exc:
        return FileResult(FileStatus.EMPTY, file.timed(file.resumed), details, str(exc))
    except FileRejected as exc:
        return FileResult(FileStatus.REJECTED, file.timed(file.resumed), details, str(exc))
    except UnreadableContent as exc:  # corrupt or oversized gzip: the rows committed stay
        status = FileStatus.PARTIAL if file.committed.rows_accepted else FileStatus.REJECTED
        return FileResult(status, file.timed(file.committed), details, str(exc))
    return FileResult(status_of(progress), progress, details)


def status_of(progress: Progress) -> FileStatus:
    if progress.rows_rejected == 0:
        return FileStatus.DONE if progress.rows_accepted else FileStatus.EMPTY
    return FileStatus.PARTIAL if progress.rows_accepted else FileStatus.REJECTED


def _records(file: FileInput, file_format: str) -> Iterator[Record]:
    """Records from the resume point (the CSV header is always read from the start)."""
    content, resumed = file.content, file.resumed
    if content is None:
        raise FileRejected("import-jobs only handles OBJECT_FINALIZE (there is no content)")
    guard = file.pacer.guard("while reading the file")
    content.seek(0)
    lines = read_lines(content, on_progress=guard)
    header = csv_header(lines) if file_format == "csv" else []
    if resumed.resume_line:
        content.seek(resumed.resume_offset)
        number, offset = resumed.resume_line + 1, resumed.resume_offset
        lines = read_lines(content, number=number, offset=offset, on_progress=guard)
    return csv_records(lines, header) if file_format == "csv" else jsonl_records(lines)


class _Importer:
    """Turns records into jobs, committing a batch (and the progress it represents) at a time.
    Counters are plain attributes: this loop runs once per row."""

    def __init__(
        self, file: FileInput, options: ImportOptions, allowed: frozenset[str] | None
    ) -> None:
        self.file = file
        self.options = options
        self.row_payload = RowRules(options, allowed).payload
        self.template = JobTemplate(options.kind, options.priority, options.max_attempts)
        self.prefix = f"{file.object.key}:"
        resumed = file.resumed
        self.accepted, self.rejected = resumed.rows_accepted, resumed.rows_rejected
        self.created, self.errors = resumed.jobs_created, list(resumed.errors)
        self.line, self.offset = resumed.resume_line, resumed.resume_offset
        self.committed_line = resumed.resume_line
        self.dialect = file.context.engine.dialect.name
        self.batch = BulkBatch(self.dialect)
        self.writer = Overlapped(background=False)
        self.rows_in_batch = self.bytes_in_batch = 0
        # The first batches are small and double up to batch_rows: the writer starts early,
        # so little of the file is read before reading and writing overlap.
        self.batch_limit = min(FIRST_BATCH_ROWS, options.batch_rows)
        self.cycle_seconds = 0.0
        self.cycle_started = time.monotonic()

    def run(self, records: Iterator[Record]) -> Progress:
        background = self.dialect == "postgresql"
        with Overlapped(background, beat=self.file.pacer.tick) as self.writer:
            for record in records:
                self.line, self.offset = record.last_line, record.end
                if record.blank:
                    self._pass_blank()
                    continue
                self._take(record)
                if self.rows_in_batch >= self.batch_limit or self.bytes_in_batch >= BATCH_BYTES:
                    self._flush()
                    self.batch_limit = min(self.batch_limit * 2, self.options.batch_rows)
                elif not self.rows_in_batch % YIELD_EVERY_ROWS:
                    time.sleep(0)  # let the writer have the GIL now, not at the next 5 ms switch
            self._flush()
        return self.file.timed(self._progress(self.created))

    def _take(self, record: Record) -> None:
        self.rows_in_batch += 1
        payload, problem = "", record.problem
        if not problem:
            payload, problem = self.row_payload(record.fields)
        if not problem:
            self.accepted += 1
            self.batch.add(f"{self.prefix}{record.line}", payload)
            self.bytes_in_batch += len(payload)
            return
        self.rejected += 1
        if len(self.errors) < self.options.max_errors:
            self.errors.append({"line": record.line, "error": problem})

    def _pass_blank(self) -> None:
        """Blank lines: commit the position every so often, so the next attempt starts past
        them even when no row follows within this attempt's budget."""
        if time.monotonic() - self.cycle_started >= BLANK_CHECKPOINT_SECONDS:
            self._flush(force=True)

    def _progress(self, created: int) -> Progress:
        return Progress(
            self.accepted, self.rejected, created, self.line, self.offset, tuple(self.errors)
        )

    def _flush(self, force: bool = False) -> None:
        """Commit the batch (or, ``force``, the position alone), unless the budget cannot cover
        it: then stop where the last commit left off (``BudgetExhausted``)."""
        if not self.rows_in_batch and not (force and self.line > self.committed_line):
            return
        self.file.pacer.ensure(self.cycle_seconds, f"after line {self.committed_line}")
        batch, self.batch = self.batch, BulkBatch(self.dialect)
        self.rows_in_batch = self.bytes_in_batch = 0
        reached = self._progress(0)  # taken now: reading goes on while the batch is written

        def work(connection: Connection) -> Progress:
            # Relaxed: the file's final status (or the note of a stop) commits synchronously.
            now = self.file.context.clock()
            inserted = insert_batch(connection, self.template, batch, relaxed=True, now=now)
            return reached.advanced(jobs_created=self.created + inserted)

        def write() -> None:
            committed = self.file.commit(work)
            if committed.jobs_created > self.created:
                wake.committed(self.file.context.engine)
            self.created, self.committed_line = committed.jobs_created, committed.resume_line

        self.writer.submit(write)
        now = time.monotonic()
        self.cycle_seconds, self.cycle_started = now - self.cycle_started, now
