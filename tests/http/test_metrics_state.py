"""/metrics answers "is work stuck?": jobs by kind and status, the oldest due job's age, inbox rows
and files by status and each tick's last completed slot, read at scrape time with a bounded,
cached query; and the sweep counts its results by kind."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import Engine, update

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http import state_metrics as metrics_state
from consumer.http.app import create_app
from consumer.http.state_metrics import StateCollector
from consumer.jobs.schema import jobs
from consumer.jobs.store import enqueue
from consumer.service import Service
from consumer.wire.envelopes_out import tick_body, wrapped_body
from consumer.wire.timeutil import utcnow
from tests.jobs import kinds_plugin
from tests.support.metrics_text import total


def scrape(collector: StateCollector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def collector(engine: Engine, cache_seconds: float = 0.0) -> StateCollector:
    return StateCollector(engine, lambda: {"sweep": 300}, cache_seconds=cache_seconds)


def test_jobs_by_kind_and_status_and_the_oldest_due_age(engine: Engine) -> None:
    now = utcnow()
    enqueue(engine, "record", {}, run_at=now - timedelta(seconds=600), allow_unknown=True)
    enqueue(engine, "record", {}, run_at=now - timedelta(seconds=5), allow_unknown=True)
    enqueue(engine, "email", {}, run_at=now + timedelta(hours=1))  # pending, not due
    text = scrape(collector(engine))
    assert total(text, "consumer_state_up") == 1
    assert total(text, "consumer_jobs", kind="record", status="pending") == 2
    assert total(text, "consumer_jobs", kind="email", status="pending") == 1
    assert 600 <= total(text, "consumer_oldest_due_job_age_seconds") < 660
    assert total(text, "consumer_tick_period_seconds", task="sweep") == 300


def test_a_running_job_whose_lease_expired_is_due_since_then(engine: Engine) -> None:
    job = enqueue(
        engine, "record", {}, run_at=utcnow() + timedelta(hours=1), allow_unknown=True
    ).job_id
    with engine.begin() as connection:  # claimed by a sweeper that died 300 s ago
        connection.execute(
            update(jobs)
            .where(jobs.c.id == job)
            .values(status="running", lease_until=utcnow() - timedelta(seconds=300))
        )
    text = scrape(collector(engine))
    assert total(text, "consumer_jobs", kind="record", status="running") == 1
    assert 300 <= total(text, "consumer_oldest_due_job_age_seconds") < 360


def test_nothing_due_is_age_zero(engine: Engine) -> None:
    enqueue(engine, "record", {}, run_at=utcnow() + timedelta(hours=1), allow_unknown=True)
    assert total(scrape(collector(engine)), "consumer_oldest_due_job_age_seconds") == 0


def test_each_count_reads_at_most_the_cap(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(5):
        enqueue(engine, "record", {}, allow_unknown=True)
    monkeypatch.setattr(metrics_state, "ROW_CAP", 3)
    assert total(scrape(collector(engine)), "consumer_jobs", status="pending") == 3


def test_scrapes_within_the_cache_time_read_the_database_once(engine: Engine) -> None:
    cached = collector(engine, cache_seconds=60)
    first = scrape(cached)
    enqueue(engine, "record", {}, allow_unknown=True)
    second = scrape(cached)
    assert cached.reads == 1
    assert first == second
    assert total(scrape(collector(engine)), "consumer_jobs", status="pending") == 1


def test_a_failing_database_gives_state_up_zero_not_an_error(tmp_path: Path) -> None:
    broken = make_engine(f"sqlite:///{tmp_path / 'no-tables.db'}")
    text = scrape(collector(broken))
    broken.dispose()
    assert total(text, "consumer_state_up") == 0
    assert "consumer_jobs" not in text


def test_ticks_inbox_and_sweep_results_through_the_app(settings: Settings, engine: Engine) -> None:
    kinds_plugin.runs_metadata.create_all(engine)
    app = create_app(Service.of(settings.with_values(plugins=("tests.jobs.kinds_plugin",)), engine))
    client = app.test_client()
    before = client.get("/metrics").get_data(as_text=True)
    enqueue(engine, "record", {}, allow_unknown=True)
    enqueue(engine, "record", {}, allow_unknown=True)
    enqueue(engine, "record", {"fail": "permanent"}, allow_unknown=True)
    enqueue(engine, "record", {"fail": "always"}, max_attempts=3, allow_unknown=True)
    assert client.post("/push", json=tick_body("sweep")).status_code == 200
    assert client.post("/push", json=wrapped_body(b"no route")).status_code == 200
    after = scrape(collector(engine))
    counters = client.get("/metrics").get_data(as_text=True)

    def delta(name: str, **labels: str) -> float:
        return total(counters, name, **labels) - total(before, name, **labels)

    assert delta("consumer_job_results_total", kind="record", result="done") == 2
    assert delta("consumer_job_results_total", kind="record", result="dead") == 1
    assert delta("consumer_job_results_total", kind="record", result="retried") == 1
    assert delta("consumer_sweep_batch_seconds_count") >= 1
    assert delta("consumer_handler_seconds_count", route="tick") == 1
    assert total(after, "consumer_jobs", kind="record", status="dead") == 1
    assert total(after, "consumer_jobs", kind="record", status="pending") == 1
    assert total(after, "consumer_tick_last_slot_timestamp_seconds", task="sweep") > 0
    assert total(after, "consumer_inbox_rows", status="unroutable") == 1
