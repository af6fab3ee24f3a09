"""A job kind for the job API's tests: ``fails-once`` is ``dead`` on its first run (``Permanent``)
and done on the next, which a retry gives it (a retry keeps the error history). Loaded beside
``tests.jobs.stamp_plugin`` through ``CONSUMER_PLUGINS``."""

from __future__ import annotations

from consumer import Job
from consumer.errors import Permanent
from consumer.jobs.kinds import JobContext
from consumer.pipeline.registry import Registry

KIND = "fails-once"


def fails_once(context: JobContext, job: Job) -> None:
    if not job.errors:
        raise Permanent("the first run of a fails-once job fails")


def register(registry: Registry) -> None:
    registry.job_kinds.add(KIND, fails_once)
