"""``enqueue_many`` on both databases, and on PostgreSQL by both of its routes (many jobs are
``COPY``-ed and moved with one ``INSERT ... SELECT``, a few go as one multi-row ``INSERT``; each
test runs both): every field a job sets arrives as it was given, ids follow the call's order, a
key already used or repeated in the call keeps the first job, and the jobs commit and roll back
with the caller's transaction, whatever it holds besides them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, func, insert, select, update

from consumer import NewJob, enqueue, enqueue_many
from consumer.jobs import store
from consumer.jobs.schema import jobs
from consumer.wire.timeutil import utcnow

TEXTS = ["tab\there", "new\nline", "back\\slash", "cr\rhere", "\\N", "é ✓ 日本", "'quote\""]
"""Every character ``COPY``'s text format escapes, its NULL marker, and non-ASCII text."""


@pytest.fixture(autouse=True, params=["copy", "insert"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every call ``COPY``-s its jobs, or none does (SQLite has one route: both runs take it)."""
    monkeypatch.setattr(store, "COPY_FROM", 1 if request.param == "copy" else 1 << 30)
    return str(request.param)


def rows(engine: Engine) -> list[object]:
    with engine.connect() as connection:
        return list(connection.execute(select(jobs).order_by(jobs.c.id)))


def test_every_field_arrives_as_given_in_the_calls_order(engine: Engine) -> None:
    later = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=-5)))
    given = [
        NewJob("email", {"text": text, "nested": [1, None, {"x": 2.5}], "bool": True},
               key=f"key {text}", run_at=later, priority=-7, max_attempts=3, lock_key=text,
               group=f"tenant {text}")
        for text in TEXTS
    ]  # fmt: skip
    given += [NewJob(f"kind\t{n}", None if n else "a string", priority=n) for n in range(3)]
    before = utcnow()
    with engine.begin() as connection:
        assert enqueue_many(connection, given, allow_unknown=True) == len(given)
    found = rows(engine)
    assert [row.kind for row in found] == [job.kind for job in given]
    for row, job in zip(found, given, strict=True):
        assert (row.payload, row.idempotency_key, row.lock_key, row.group_key) == (
            job.payload,
            job.key,
            job.lock_key,
            job.group,
        )
        assert (row.priority, row.max_attempts, row.status, row.attempts) == (
            job.priority, job.max_attempts, "pending", 0,
        )  # fmt: skip
        assert row.created_at == row.updated_at and before <= row.created_at <= utcnow()
        assert row.run_at == (job.run_at or row.created_at)
        assert (row.finished_at, row.lease_until, row.claimed_by) == (None, None, None)
    assert found[0].run_at == later.astimezone(UTC)


def test_a_key_repeated_in_the_call_keeps_its_first_job(engine: Engine) -> None:
    batch = [NewJob("email", {"n": n}, key=f"k{n % 3}") for n in range(9)]
    with engine.begin() as connection:
        assert enqueue_many(connection, batch) == 3
    found = rows(engine)
    assert [(row.idempotency_key, row.payload) for row in found] == [
        ("k0", {"n": 0}), ("k1", {"n": 1}), ("k2", {"n": 2}),
    ]  # fmt: skip
    assert [row.id for row in found] == sorted(row.id for row in found)


def test_a_key_already_used_keeps_the_existing_job_finished_or_not(engine: Engine) -> None:
    done = enqueue(engine, "email", {"old": "done"}, key="done-key", priority=1)
    enqueue(engine, "email", {"old": "pending"}, key="pending-key")
    with engine.begin() as connection:
        connection.execute(update(jobs).where(jobs.c.id == done.job_id).values(status="done"))
    batch = [
        NewJob("email", {"new": 1}, key="done-key", priority=9),
        NewJob("email", {"new": 2}, key="fresh"),
        NewJob("email", {"new": 3}, key="pending-key", lock_key="lk"),
    ]
    with engine.begin() as connection:
        assert enqueue_many(connection, batch) == 1
    by_key = {row.idempotency_key: row for row in rows(engine)}
    assert len(by_key) == 3
    assert (by_key["done-key"].payload, by_key["done-key"].status) == ({"old": "done"}, "done")
    assert by_key["done-key"].priority == 1 and by_key["done-key"].id == done.job_id
    assert (by_key["pending-key"].payload, by_key["pending-key"].lock_key) == (
        {"old": "pending"},
        None,
    )
    assert by_key["fresh"].payload == {"new": 2}


def test_a_rollback_of_the_callers_transaction_leaves_nothing(engine: Engine) -> None:
    with pytest.raises(RuntimeError), engine.begin() as connection:
        connection.execute(insert(jobs).values(**own_row("caller's own")))
        assert enqueue_many(connection, [NewJob("email", {"n": n}) for n in range(500)]) == 500
        assert enqueue_many(connection, [NewJob("email", {}, key="second call")]) == 1
        raise RuntimeError("the caller's work failed")
    assert rows(engine) == []
    with engine.connect() as connection:  # commit as you go: nothing is committed until asked
        enqueue_many(connection, [NewJob("email", {}, key="uncommitted")])
        connection.rollback()
        enqueue_many(connection, [NewJob("email", {}, key="committed")])
        connection.execute(insert(jobs).values(**own_row("with it")))
        connection.commit()
    assert [row.idempotency_key for row in rows(engine)] == ["committed", "with it"]


def test_a_second_call_in_one_transaction_sees_the_keys_of_the_first(engine: Engine) -> None:
    with engine.begin() as connection:
        assert enqueue_many(connection, [NewJob("email", {}, key=f"k{n}") for n in range(4)]) == 4
        assert (
            enqueue_many(connection, [NewJob("email", {}, key=f"k{n}") for n in range(2, 7)]) == 3
        )
    assert len(rows(engine)) == 7


@pytest.mark.postgres
def test_an_autocommit_connection_gets_the_call_whole(pg_engine: Engine) -> None:
    """Each statement of an autocommit connection commits: the stage would be emptied between
    the ``COPY`` and the move. The call runs in a transaction of its own instead."""
    with pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        batch = [NewJob("email", {"n": n}, key=f"a{n % 50}") for n in range(100)]
        assert enqueue_many(connection, batch) == 50
        assert enqueue_many(connection, batch) == 0
    assert len(rows(pg_engine)) == 50


def test_an_empty_call_inserts_nothing(engine: Engine) -> None:
    with engine.begin() as connection:
        assert enqueue_many(connection, []) == 0
        assert connection.execute(select(func.count()).select_from(jobs)).scalar_one() == 0


def own_row(key: str) -> dict[str, object]:
    """A job row the caller writes itself, beside its ``enqueue_many``."""
    now = utcnow()
    return {
        "kind": "email", "payload": {}, "status": "pending", "priority": 0, "run_at": now,
        "attempts": 0, "idempotency_key": key, "created_at": now, "updated_at": now,
    }  # fmt: skip
