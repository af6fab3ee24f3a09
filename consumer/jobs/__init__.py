"""Durable jobs, run exactly once in effect by the ``sweep`` tick task.

Public API: ``enqueue`` / ``enqueue_many`` to add jobs, ``NewJob`` and ``EnqueueResult``.
"""

from consumer.jobs.model import EnqueueResult, InvalidJob, Job, NewJob, Status, UnknownKind
from consumer.jobs.store import enqueue, enqueue_many

__all__ = [
    "EnqueueResult", "InvalidJob", "Job", "NewJob", "Status", "UnknownKind", "enqueue",
    "enqueue_many",
]  # fmt: skip
