"""Prometheus metrics: what each process did (counters and histograms, incremented by one-line
calls from the code that did it), plus the database's state read at scrape time
(``consumer.http.state_metrics``).

Under gunicorn every worker is its own process, so ``PROMETHEUS_MULTIPROC_DIR`` must name a
directory shared by the workers (the image sets it; ``consumer serve`` makes one): ``/metrics``
then sums every worker's files instead of showing whichever worker answered the scrape. The
directory must exist before the workers start and be emptied when the server starts
(``gunicorn_conf.on_starting``); a dead worker's files are marked by ``gunicorn_conf.child_exit``.
Every metric here is a counter or histogram, which need no multiprocess mode.

The names are the contract with k8s/monitoring (alert rules and the Grafana dashboard):
``tests/observe/test_monitoring_names.py`` checks that every name used there is exported here.
"""

from __future__ import annotations

import collections
import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

from consumer.wire.outcomes import Outcome

F = TypeVar("F", bound=Callable[..., Any])
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Handlers run from milliseconds (a duplicate) up to the ack deadline (at most 600 s).
HANDLER_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


def _prepare_multiprocess_dir() -> None:
    """Any process that imports this module (a CLI command, the migration Job) writes its values
    to the directory the environment names: create it if missing; if it cannot be created, keep
    this process's values in memory rather than fail at import."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        values.ValueClass = values.MutexValue


_prepare_multiprocess_dir()
DECISIONS = Counter(
    "consumer_push_decisions_total",
    "Push requests by route, outcome and HTTP status",
    ["route", "outcome", "status"],
)
DURATION = Histogram("consumer_push_seconds", "Time to decide a push request", ["outcome"])
HANDLER_SECONDS = Histogram(
    "consumer_handler_seconds",
    "Time to decide a delivery, by route (tick, storage, deploy, ...)",
    ["route"],
    buckets=HANDLER_BUCKETS,
)
JOB_RESULTS = Counter(
    "consumer_job_results_total",
    "Jobs run by the sweep, by kind and result (done, retried, dead)",
    ["kind", "result"],
)
SWEEP_BATCH_SECONDS = Histogram(
    "consumer_sweep_batch_seconds",
    "Time to run one claimed batch of jobs (the _count is the number of batches)",
    buckets=HANDLER_BUCKETS,
)
JOB_THROTTLED = Counter(
    "consumer_job_claims_throttled_total",
    "Claims that left due jobs of a kind for its flow control, by kind and reason (cap, rate)",
    ["kind", "reason"],
)
FILE_ROWS = Counter(
    "consumer_file_rows_total",
    "Rows of imported files, by processor and result (accepted, rejected)",
    ["processor", "result"],
)
FILES = Counter(
    "consumer_files_processed_total",
    "Files whose processing ended, by processor and final status",
    ["processor", "status"],
)
WARM_TARGETS = Counter(
    "consumer_warm_targets_total",
    "Cache-warming targets, by warmer and result (ok, failed, not_reached)",
    ["warmer", "result"],
)
REDRIVES = Counter(
    "consumer_inbox_redrives_total",
    "Running inbox rows nobody redelivered, run again by the service from their stored message, "
    "by route",
    ["route"],
)
CERT_FETCH_FAILURES = Counter(
    "consumer_oidc_cert_fetch_failures_total",
    "Failed fetches of Google's OIDC signing certificates (a push fails if no copy is cached)",
)


_DECISION_SERIES: dict[tuple[str, str, int], tuple[Any, Any, Any]] = {}
"""The labelled series of each (route, outcome, status), looked up once: ``labels()`` takes a
lock and builds its key on every call, three times per request otherwise."""


def record(outcome: Outcome, seconds: float) -> None:
    """One decision of any source (push, deploy hook, pull)."""
    key = (outcome.route, outcome.kind.value, outcome.http_status)
    series = _DECISION_SERIES.get(key)
    if series is None:
        series = _DECISION_SERIES.setdefault(key, _decision_series(*key))
    decided, duration, handled = series
    decided.inc()
    duration.observe(seconds)
    handled.observe(seconds)


def _decision_series(route: str, kind: str, status: int) -> tuple[Any, Any, Any]:
    return (
        DECISIONS.labels(route, kind, str(status)),
        DURATION.labels(kind),
        HANDLER_SECONDS.labels(route),
    )


def sweep_batch_recorded(batch: Any) -> None:
    """A batch's results, once recorded: ``batch.jobs`` with ``done`` ids and ``failures``.
    Counted per (kind, result) first: one ``labels`` lookup per pair, not one per job (it cost
    the sweep about a fifth of its CPU)."""
    for (kind, result), count in _batch_results(batch).items():
        if count:
            JOB_RESULTS.labels(kind, result).inc(count)


def _batch_results(batch: Any) -> collections.Counter[tuple[str, str]]:
    """A batch's results by (kind, result); a batch of one kind (the usual claim) without a
    look-up per job."""
    kinds = {job.kind for job in batch.jobs}
    if len(kinds) == 1:
        (kind,) = kinds
        counts = collections.Counter({(kind, "done"): len(batch.done)})
        for failure in batch.failures:
            counts[kind, _failed(failure)] += 1
        return counts
    kind_of = {job.id: job.kind for job in batch.jobs}
    counts = collections.Counter((kind_of.get(job_id, "?"), "done") for job_id in batch.done)
    for failure in batch.failures:
        counts[kind_of.get(failure.job_id, "?"), _failed(failure)] += 1
    return counts


def _failed(failure: Any) -> str:
    return "dead" if failure.dead else "retried"


def claim_throttled(kind: str, reason: str) -> None:
    JOB_THROTTLED.labels(kind, reason).inc()


def timed_sweep_batch(method: F) -> F:
    """Decorates the sweep's batch runner: its duration goes to ``consumer_sweep_batch_seconds``."""

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        with SWEEP_BATCH_SECONDS.time():
            return method(*args, **kwargs)

    return timed  # type: ignore[return-value]


def file_processed(processor: str, result: Any, resumed: Any) -> None:
    """A file's run ended with ``result`` (a FileResult); ``resumed`` is the progress it started
    from, so rows a previous attempt already counted are not counted twice."""
    progress = result.progress
    accepted = progress.rows_accepted - getattr(resumed, "rows_accepted", 0)
    rejected = progress.rows_rejected - getattr(resumed, "rows_rejected", 0)
    FILE_ROWS.labels(processor, "accepted").inc(max(accepted, 0))
    FILE_ROWS.labels(processor, "rejected").inc(max(rejected, 0))
    FILES.labels(processor, str(result.status.value)).inc()


def warm_run(report: Any) -> None:
    """A warmer's ``WarmReport``."""
    WARM_TARGETS.labels(report.warmer, "ok").inc(report.ok)
    WARM_TARGETS.labels(report.warmer, "failed").inc(len(report.failed))
    WARM_TARGETS.labels(report.warmer, "not_reached").inc(len(report.not_reached))


def redriven(route: str) -> None:
    REDRIVES.labels(route).inc()


def cert_fetch_failed() -> None:
    CERT_FETCH_FAILURES.inc()


def exposition(state: Any = None) -> bytes:
    """What ``/metrics`` serves (as ``CONTENT_TYPE_LATEST``): this process's (or every
    worker's) metrics, plus ``state`` (a collector of the database's state,
    ``consumer.http.state_metrics.StateCollector``)."""
    payload = generate_latest(process_registry())
    if state is not None:
        scraped = CollectorRegistry(auto_describe=False)
        scraped.register(state)
        payload += generate_latest(scraped)
    return bytes(payload)


def process_registry() -> CollectorRegistry:
    """Every worker's files summed when the multiprocess directory is set, else this process."""
    if not os.environ.get(MULTIPROC_ENV):
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry
