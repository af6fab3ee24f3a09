"""A test plugin that adds file processors the way a user does (``CONSUMER_PLUGINS``).

- ``flaky-import``: ``import-jobs``, except that the first delivery commits a few batches and
  then fails with a retryable error (HTTP 503): the redelivery must finish the file without
  creating any job twice.
- ``slow-import``: ``import-jobs`` with each commit delayed by ``delay`` seconds (an option), to
  make a file outlast its time budget or a heartbeat interval.
- ``stuck-import``: stops for lack of budget before committing anything (a file that can never
  progress).
- ``audit``: records which object a delete / archive event named (no content).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection

from consumer import FileInput, FileResult, FileStatus, Progress
from consumer.errors import Retryable
from consumer.pipeline.registry import Registry
from consumer.storage.import_jobs import import_jobs
from consumer.storage.processors import processors_of

FAIL_AFTER_COMMITS = 3


def flaky_import(file: FileInput) -> FileResult:
    if file.context.attempt > 1:
        return import_jobs(file)
    commits = 0
    commit = file.commit

    def failing_commit(work: Callable[[Connection], Progress]) -> Progress:
        nonlocal commits
        if commits == FAIL_AFTER_COMMITS:
            raise Retryable(f"simulated failure after {commits} committed batches")
        commits += 1
        return commit(work)

    file.commit = failing_commit  # type: ignore[method-assign]
    return import_jobs(file)


def slow_import(file: FileInput) -> FileResult:
    delay = float(file.options.get("delay", 0.5))
    commit = file.commit

    def slow_commit(work: Callable[[Connection], Progress]) -> Progress:
        time.sleep(delay)
        return commit(work)

    file.commit = slow_commit  # type: ignore[method-assign]
    options = {key: value for key, value in file.options.items() if key != "delay"}
    file.options = options
    return import_jobs(file)


def stuck_import(file: FileInput) -> FileResult:
    file.pacer.ensure(file.context.remaining() + 1, "before the first row")
    raise AssertionError("the budget guard did not stop")


def audit(file: FileInput) -> FileResult:
    details = {"audited": file.object.url, "has_content": file.content is not None}
    return FileResult(FileStatus.DONE, details=details)


def register(registry: Registry) -> None:
    processors = processors_of(registry)
    processors.add("flaky-import", flaky_import)
    processors.add("slow-import", slow_import)
    processors.add("stuck-import", stuck_import)
    processors.register("audit")(audit)
