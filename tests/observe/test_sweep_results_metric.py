"""``consumer_job_results_total`` counts a recorded batch's results by kind and result, the same
whether the batch holds one kind (counted without a look-up per job) or several; a result with
no job makes no series."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from prometheus_client import REGISTRY

from consumer.jobs.batch import Batch
from consumer.jobs.model import Failure, Job, Status
from consumer.observe import metrics

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(job_id: int, kind: str) -> Job:
    return Job(job_id, kind, {}, Status.RUNNING, 0, NOW, 1, None, None, NOW)


def failure(job_id: int, dead: bool) -> Failure:
    return Failure(job_id, dead, NOW, "boom", [])


def count(kind: str, result: str) -> float | None:
    labels = {"kind": kind, "result": result}
    return REGISTRY.get_sample_value("consumer_job_results_total", labels)


def test_a_batch_of_one_kind_is_counted_by_result() -> None:
    kind = f"one-{uuid.uuid4().hex[:8]}"
    batch = Batch("t", [job(n, kind) for n in range(1, 7)], requested=6)
    batch.done.extend([1, 2, 3])
    batch.failures.extend([failure(4, dead=True), failure(5, dead=False), failure(6, False)])
    metrics.sweep_batch_recorded(batch)
    assert (count(kind, "done"), count(kind, "dead"), count(kind, "retried")) == (3, 1, 2)


def test_a_batch_of_several_kinds_counts_each_kind_s_results() -> None:
    a, b = (f"{name}-{uuid.uuid4().hex[:8]}" for name in "ab")
    batch = Batch("t", [job(1, a), job(2, b), job(3, a), job(4, b)], requested=4)
    batch.done.extend([1, 2, 3])
    batch.failures.append(failure(4, dead=True))
    metrics.sweep_batch_recorded(batch)
    assert (count(a, "done"), count(b, "done"), count(b, "dead")) == (2, 1, 1)
    assert count(a, "dead") is None and count(a, "retried") is None


def test_a_result_no_job_had_makes_no_series() -> None:
    kind = f"none-{uuid.uuid4().hex[:8]}"
    batch = Batch("t", [job(1, kind)], requested=1)
    batch.failures.append(failure(1, dead=False))
    metrics.sweep_batch_recorded(batch)
    assert count(kind, "retried") == 1
    assert count(kind, "done") is None and count(kind, "dead") is None
