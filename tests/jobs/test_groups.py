"""Job groups: the group a job is given (Python, the CLI, the jobs topic, the SQL function) and
the claim's turns: a group's backlog is spread out behind its first job, so another group's job
enqueued behind it is claimed next, and two backlogs are claimed in turn. On both databases."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import Engine, insert, null, select

from consumer import NewJob, enqueue, enqueue_many
from consumer.config.settings import Settings
from consumer.jobs.declared import declare
from consumer.jobs.model import InvalidJob, Job, group_from
from consumer.jobs.schema import job_kinds
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow

KIND = "record"


def add(engine: Engine, new_jobs: list[NewJob]) -> None:
    with engine.begin() as connection:
        enqueue_many(connection, new_jobs, kinds=[KIND])


def claim(engine: Engine, size: int) -> list[Job]:
    now = utcnow()
    return JobStore(engine).claim("t", size, [KIND], now, now + timedelta(seconds=60))


def test_a_group_is_a_non_empty_bounded_string() -> None:
    for bad in ("", "x" * 201, 7):
        with pytest.raises(InvalidJob, match="group must be a string"):
            NewJob(KIND, {}, group=bad)  # type: ignore[arg-type]
    assert NewJob(KIND, {}, group="tenant-1").group == "tenant-1"


def test_a_job_behind_another_groups_backlog_is_claimed_next(engine: Engine) -> None:
    add(engine, [NewJob(KIND, {"n": n}, group="a") for n in range(300)])
    [b] = [enqueue(engine, KIND, {"n": "b"}, kinds=[KIND], group="b").job_id]
    first = claim(engine, 5)
    assert b in [job.id for job in first], "group b's job waited behind group a's backlog"
    assert {job.group_key for job in first} == {"a", "b"}
    assert [job.id for job in first] == [job.id for job in sorted(first, key=_turn)]


def _turn(job: Job) -> tuple[object, int]:
    return (job.fair_at or job.run_at, job.id)


def test_two_backlogs_are_claimed_in_turn(engine: Engine) -> None:
    add(engine, [NewJob(KIND, {"n": n}, group="a") for n in range(100)])
    add(engine, [NewJob(KIND, {"n": n}, group="c") for n in range(100)])
    took = Counter(job.group_key for job in claim(engine, 40))
    assert abs(took["a"] - took["c"]) <= 2, took


def test_ungrouped_jobs_keep_their_order_and_carry_no_turn(engine: Engine) -> None:
    add(engine, [NewJob(KIND, {"n": n}) for n in range(5)])
    claimed = claim(engine, 5)
    assert [job.payload["n"] for job in claimed] == list(range(5))
    assert {(job.group_key, job.fair_at) for job in claimed} == {(None, None)}


def test_a_group_that_drained_starts_again_from_now(engine: Engine) -> None:
    add(engine, [NewJob(KIND, {"n": n}, group="a") for n in range(3)])
    first = claim(engine, 3)
    JobStore(engine).complete("t", utcnow(), done=[job.id for job in first])
    before = utcnow()
    add(engine, [NewJob(KIND, {"n": 9}, group="a")])
    [again] = claim(engine, 1)
    assert again.fair_at is not None and again.fair_at >= before - timedelta(milliseconds=2)
    assert again.fair_at - before < timedelta(seconds=5)


@pytest.mark.postgres
def test_the_sql_function_takes_a_group_and_old_callers_still_work(pg_engine: Engine) -> None:
    with pg_engine.begin() as connection:
        connection.execute(insert(job_kinds).values(
            kind=KIND, producer_fields=null(), max_payload_bytes=65536, updated_at=utcnow(),
            group_field="tenant",
        ))  # fmt: skip
    dsn = pg_engine.url.render_as_string(hide_password=False).replace("+psycopg", "")
    with psycopg.connect(dsn) as connection:
        named = "SELECT consumer_enqueue(%s, %s::jsonb, group_key => %s)"
        given = connection.execute(named, [KIND, "{}", "g1"]).fetchone()
        old = "SELECT consumer_enqueue(%s, %s::jsonb, %s, NULL, 0, NULL, NULL)"
        derived = connection.execute(old, [KIND, json.dumps({"tenant": "t7"}), "k1"]).fetchone()
        connection.commit()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="group_key must be"):
            connection.execute(named, [KIND, "{}", ""])
    assert given is not None and derived is not None
    store = JobStore(pg_engine)
    assert store.get(given[0]).group_key == "g1"  # type: ignore[union-attr]
    assert store.get(derived[0]).group_key == "t7"  # type: ignore[union-attr]


def test_the_jobs_topic_takes_a_group_attribute(engine: Engine, settings: Settings) -> None:
    settings = settings.with_values(plugins=("tests.jobs.kinds_plugin",))
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    message = PushMessage("m1", utcnow(), data=b"{}", subscription="projects/p/subscriptions/s",
                          attributes={"job_kind": KIND, "job_group": "tenant-4"})  # fmt: skip
    assert dispatcher.dispatch(message).kind is Kind.DONE
    [job] = JobStore(engine).list(limit=10)
    assert (job.group_key, job.fair_at is not None) == ("tenant-4", True)
    empty = PushMessage("m2", utcnow(), data=b"{}", subscription="projects/p/subscriptions/s",
                        attributes={"job_kind": KIND, "job_group": ""})  # fmt: skip
    refused = dispatcher.dispatch(empty)
    assert refused.kind is Kind.DEAD and "group must be" in refused.details["error"]


def test_a_kind_groups_by_a_payload_field_on_the_topic_and_in_sql(
    engine: Engine, settings: Settings
) -> None:
    settings = settings.with_values(plugins=("tests.jobs.kinds_plugin",))
    registry = build_registry(settings)
    registry.job_limit(KIND, group_by="tenant")
    dispatcher = Dispatcher(settings, engine, registry)
    for n, attributes in enumerate([{}, {"job_group": "given"}]):
        data = json.dumps({"tenant": "acme"}).encode()
        message = PushMessage(f"m{n}", utcnow(), data=data, subscription="projects/p/subs/s",
                              attributes={"job_kind": KIND, **attributes})  # fmt: skip
        assert dispatcher.dispatch(message).kind is Kind.DONE
    assert sorted(str(job.group_key) for job in JobStore(engine).list(limit=10)) == [
        "acme",
        "given",
    ]
    with engine.begin() as connection:
        declare(connection, registry.job_kinds, settings, registry.job_limits)
        fields = dict(connection.execute(select(job_kinds.c.kind, job_kinds.c.group_field)).all())
    assert fields[KIND] == "tenant" and fields["email"] is None


def test_a_group_from_a_payload_field_is_text_or_none() -> None:
    assert [group_from(p, "t") for p in ({"t": "a"}, {"t": 7}, {"t": ""}, {"t": True}, {})] == [
        "a", "7", None, None, None,
    ]  # fmt: skip
    assert group_from({"t": "a"}, None) is None
