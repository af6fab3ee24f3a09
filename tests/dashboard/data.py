"""Real data for the dashboard tests, made the way production makes it: events pushed through
the dispatcher (dead and unroutable rows), jobs enqueued and swept, a file import recorded."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.store import WarmRuns
from consumer.jobs import store
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.storage.model import FileStatus, Progress, StoredObject
from consumer.storage.store import ProcessedFiles
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body, tick_body
from consumer.wire.events import DeployEvent
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow

PLUGIN = "tests.dashboard.plugin"
DEAD_RELEASES = ("r1", "r2")
UNROUTABLE_TASK = "late-task"


@dataclass(frozen=True)
class Seeded:
    dead_keys: tuple[str, ...]
    unroutable_key: str
    dead_jobs: tuple[int, ...]
    done_job: int
    pending_job: int


def _dispatch(dispatcher: Dispatcher, body: dict[str, object]) -> Kind:
    return dispatcher.dispatch(parse_wrapped(body, Limits())).kind


def _job(engine: Engine, payload: dict[str, object], **options: object) -> int:
    job_id = store.enqueue(engine, "report", payload, kinds=["report"], **options).job_id  # type: ignore[arg-type]
    assert job_id is not None
    return job_id


def seed(settings: Settings, engine: Engine) -> Seeded:
    """Two dead deploys, one unroutable tick, two dead jobs, a done one, a pending one, a file."""
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    dead = []
    for release in DEAD_RELEASES:
        assert _dispatch(dispatcher, deploy_body("shop", release)) is Kind.DEAD
        dead.append(f"deploy:shop:{release}")
    assert _dispatch(dispatcher, tick_body(UNROUTABLE_TASK)) is Kind.UNROUTABLE
    unroutable = next(
        row.key for row in dispatcher.inbox.list() if row.key.startswith(f"tick:{UNROUTABLE_TASK}:")
    )
    dead_jobs = tuple(_job(engine, {"fail": True}, max_attempts=1) for _ in range(2))
    done_job = _job(engine, {"fail": False})
    pending_job = _job(engine, {}, run_at=utcnow() + timedelta(hours=1))
    assert _dispatch(dispatcher, tick_body("sweep")) is Kind.DONE
    _job(engine, {}, run_at=utcnow() - timedelta(minutes=3))  # due, waiting for a sweep
    _file(engine)
    _warm_run(engine)
    return Seeded(tuple(dead), unroutable, dead_jobs, done_job, pending_job)


def _file(engine: Engine) -> None:
    files, now = ProcessedFiles(engine), utcnow()
    upload = StoredObject("uploads", "orders-2026-11-30.csv", 1764480000000000, size=2048)
    files.begin(upload, "csv", "run-1", now)
    progress = Progress(rows_accepted=41, rows_rejected=2, jobs_created=41, resume_line=44)
    files.finish(upload, "run-1", FileStatus.PARTIAL, progress, now)


def _warm_run(engine: Engine) -> None:
    """An earlier release that warmed fine (one target failed)."""
    results = (
        TargetResult("https://shop.example/", True, 0.12, status=200),
        TargetResult("https://shop.example/cart", True, 0.31, status=200),
        TargetResult("https://shop.example/old", False, 0.05, status=404, error="HTTP 404"),
    )
    report = WarmReport("http", results, duration_seconds=0.4)
    event = DeployEvent("shop", "r0", PushMessage(message_id="1", publish_time=utcnow()))
    WarmRuns(engine).record(event, 1, utcnow() - timedelta(hours=2), report)
