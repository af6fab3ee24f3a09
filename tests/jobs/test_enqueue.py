"""The public enqueue API on both databases: idempotency keys are enforced by the database."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select, update

from consumer import InvalidJob, NewJob, UnknownKind, enqueue, enqueue_many
from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.jobs.schema import jobs
from consumer.pipeline.registry import Registry
from consumer.wire.timeutil import utcnow


def count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(jobs)).scalar_one())


def test_enqueue_inserts_a_pending_job(engine: Engine) -> None:
    later = utcnow() + timedelta(hours=1)
    result = enqueue(engine, "email", {"to": "a@example.com"}, run_at=later, priority=3)
    assert result.inserted and result.job_id is not None
    with engine.connect() as connection:
        row = connection.execute(select(jobs).where(jobs.c.id == result.job_id)).one()
    assert (row.kind, row.status, row.priority, row.attempts) == ("email", "pending", 3, 0)
    assert row.payload == {"to": "a@example.com"}
    assert row.run_at == later


def test_duplicate_key_is_reported_not_inserted(engine: Engine) -> None:
    first = enqueue(engine, "email", {"n": 1}, key="order-7")
    second = enqueue(engine, "email", {"n": 2}, key="order-7")
    assert first.inserted and second.duplicate
    assert second.job_id == first.job_id
    assert count(engine) == 1


def test_jobs_without_key_are_never_duplicates(engine: Engine) -> None:
    assert enqueue(engine, "email", {}).inserted
    assert enqueue(engine, "email", {}).inserted
    assert count(engine) == 2


def test_key_stays_taken_after_the_job_finished(engine: Engine) -> None:
    first = enqueue(engine, "email", {}, key="file-1/row-1")
    with engine.begin() as connection:
        connection.execute(update(jobs).values(status="done", finished_at=utcnow()))
    assert enqueue(engine, "email", {}, key="file-1/row-1").job_id == first.job_id
    with engine.begin() as connection:
        assert enqueue_many(connection, [NewJob("email", {}, key="file-1/row-1")]) == 0
    assert count(engine) == 1


def test_enqueue_many_skips_existing_and_repeated_keys(engine: Engine) -> None:
    enqueue(engine, "email", {}, key="k1")
    batch = [NewJob("email", {"i": i}, key=f"k{i % 5}") for i in range(10)] + [
        NewJob("email", {"i": "nokey"})
    ]
    with engine.begin() as connection:
        inserted = enqueue_many(connection, batch)
    assert inserted == 5  # k0, k2, k3, k4 once each, plus the job without a key
    assert count(engine) == 6


def test_enqueue_many_joins_the_callers_transaction(engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as connection:
        assert enqueue_many(connection, [NewJob("email", {}, key="x")]) == 1
        raise RuntimeError("the caller's work failed")
    assert count(engine) == 0


def test_enqueue_many_handles_thousands(engine: Engine) -> None:
    batch = [NewJob("email", {"i": i}, key=f"bulk-{i}") for i in range(2500)]
    with engine.begin() as connection:
        assert enqueue_many(connection, batch) == 2500
    with engine.begin() as connection:
        assert enqueue_many(connection, batch) == 0
    assert count(engine) == 2500


def test_concurrent_enqueues_of_one_key_insert_once(engine: Engine) -> None:
    results = []
    barrier = threading.Barrier(6)

    def race() -> None:
        barrier.wait()
        results.append(enqueue(engine, "email", {}, key="race"))

    threads = [threading.Thread(target=race) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(result.inserted for result in results) == 1
    assert len({result.job_id for result in results}) == 1
    assert count(engine) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": ""},
        {"kind": "x" * 101},
        {"kind": "email", "max_attempts": 0},
        {"kind": "email", "key": ""},
        {"kind": "email", "priority": "high"},
    ],
)
def test_invalid_requests_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidJob):
        NewJob(payload={}, **kwargs)  # type: ignore[arg-type]


def test_naive_run_at_is_refused(engine: Engine) -> None:
    with pytest.raises(InvalidJob):
        enqueue(engine, "email", {}, run_at=utcnow().replace(tzinfo=None))


def test_a_kind_no_plugin_provides_is_refused_unless_allowed(engine: Engine) -> None:
    with pytest.raises(UnknownKind, match=r"'no-such-kind'.*allow_unknown=True"):
        enqueue(engine, "no-such-kind", {})
    with pytest.raises(UnknownKind, match="'no-such-kind'"), engine.begin() as connection:
        enqueue_many(connection, [NewJob("email", {}), NewJob("no-such-kind", {})])
    with engine.connect() as connection:  # the whole call was refused
        assert connection.execute(select(func.count()).select_from(jobs)).scalar() == 0
    assert enqueue(engine, "no-such-kind", {}, allow_unknown=True).inserted
    with engine.begin() as connection:
        assert enqueue_many(connection, [NewJob("no-such-kind", {})], allow_unknown=True) == 1
    assert enqueue(engine, "email", {}).inserted  # built in


def test_outside_local_mode_the_email_kind_needs_an_smtp_host() -> None:
    env = {"CONSUMER_PUSH_TOKEN": "a-long-enough-shared-token", "CONSUMER_SOURCES": "s=job"}
    with pytest.raises(SettingsError, match="CONSUMER_SMTP_HOST is required outside local mode"):
        Settings.from_env(env)
    tools = Settings.from_env(env, serves_push=False)  # CLI tools that send no mail start
    with pytest.raises(SettingsError, match="CONSUMER_SMTP_HOST is required"):
        tools.require_mail_transport()  # what pull mode and `sweep --once` call: they send mail
    assert Settings.from_env({**env, "CONSUMER_SMTP_HOST": "smtp.example.com"}).smtp.host
    assert not Settings.from_env({"CONSUMER_LOCAL_MODE": "true"}).smtp.host  # maildir locally


def test_the_kinds_a_caller_passes_are_the_known_ones(engine: Engine) -> None:
    """A caller that holds its registry passes its kinds: no other registry is consulted, so a
    kind another registry in this process has is still refused here."""
    other = Registry()
    other.job_kind("sms")(lambda context, job: None)
    with pytest.raises(UnknownKind, match="'sms'"):
        enqueue(engine, "sms", {}, kinds=("fax",))
    assert enqueue(engine, "fax", {}, kinds=("fax",)).inserted
    assert enqueue(engine, "email", {}, kinds=()).inserted  # built in
    with pytest.raises(UnknownKind, match="'sms'"), engine.begin() as connection:
        enqueue_many(connection, [NewJob("sms", {})], kinds=("fax",))
    assert "sms" in other.job_kinds  # held all along
