"""Durable jobs, run exactly once in effect by the ``sweep`` tick task (docs/jobs.md). Enqueue
with ``consumer.enqueue`` / ``consumer.enqueue_many``."""
