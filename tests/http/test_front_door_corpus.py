"""The differential hostile corpus (``tests.http.corpus``): every request goes to the four servings
of ``tests.http.servings`` (gunicorn with the bridge, wsgiref, Werkzeug, a host app with the
extension), each on its own PostgreSQL database, and gets the same status and body from each;
none of the hostile ones changes a database or reaches the recording HTTP target.

Two differences are the servers' own and allowed, each a refusal before the app: gunicorn answers
a method that is not upper-case with its own 400, and wsgiref cannot read a chunked body, which
the door then refuses with 411 instead of reading it as empty.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy.pool import NullPool

from bench.support.target_servers import PyTarget
from consumer.jobs.schema import jobs
from consumer.wire.envelopes_out import LOCAL_SUBSCRIPTION
from consumer.wire.timeutil import utcnow
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey
from tests.conftest import (
    PG_ADMIN_DSN,
    TEST_SIGNING_SECRET,
    Server,
    migrated_postgres_database,
)
from tests.http.corpus import controls, hostile
from tests.http.corpus_credentials import wrong_source
from tests.http.corpus_headers import header_names
from tests.http.corpus_jobs import job_api, job_controls
from tests.http.corpus_kit import (
    HOOK_SECRET,
    JOB_AUDIENCE,
    JOB_CALLER,
    JOB_SECRET,
    REPORT_CLAIM,
    REPORT_KIND,
    REPORT_SECRET,
    REPORTED_JOB,
    SCHEDULER,
    TICK_AUDIENCE,
    TICK_SECRET,
    Kit,
    Probe,
)  # fmt: skip
from tests.http.servings import SERVINGS, Answer, Serving, servings

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def env_of(certs: str, target: str) -> Callable[[str], dict[str, str]]:
    billing = {"name": "billing", "url": f"{target}/tick", "auth": {"type": "none"},
               "serves": {"tick": "billing", "period_seconds": 60},
               "timeout_seconds": 1}  # fmt: skip
    reporter = {"name": "reporter", "url": f"{target}/job", "serves": {"job_kind": REPORT_KIND},
                "auth": {"type": "hmac", "secrets": [REPORT_SECRET]}}  # fmt: skip

    def env(database_url: str) -> dict[str, str]:
        return {
            "CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "false",
            "CONSUMER_LOG_LEVEL": "ERROR", "CONSUMER_SMTP_HOST": "127.0.0.1",
            "CONSUMER_PUSH_AUDIENCE": AUDIENCE, "CONSUMER_PUSH_SERVICE_ACCOUNTS": ACCOUNT,
            "CONSUMER_OIDC_CERTS_URL": certs,
            "CONSUMER_TICK_HOOK_SECRETS": TICK_SECRET,
            "CONSUMER_TICK_HOOK_AUDIENCE": TICK_AUDIENCE,
            "CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS": SCHEDULER,
            "CONSUMER_DEPLOY_HOOK_SECRETS": HOOK_SECRET,
            "CONSUMER_JOB_API_SECRETS": JOB_SECRET, "CONSUMER_JOB_API_AUDIENCE": JOB_AUDIENCE,
            "CONSUMER_JOB_API_SERVICE_ACCOUNTS": JOB_CALLER,
            "CONSUMER_TICK_PERIODS": "sweep=60",
            "CONSUMER_HTTP_TARGETS": json.dumps([billing, reporter]),
            "CONSUMER_SOURCES": f"{LOCAL_SUBSCRIPTION}=tick+storage+deploy+other,jobs-push=job",
            "CONSUMER_SIGNING_SECRETS": TEST_SIGNING_SECRET,
        }  # fmt: skip

    return env


@pytest.fixture
def target() -> Iterator[PyTarget]:
    with PyTarget().running() as running:
        yield running


@pytest.fixture
def four(
    google_key: SigningKey,
    certs_server: CertsServer,
    target: PyTarget,
    start_server: Callable[..., Server],
) -> Iterator[dict[str, Serving]]:
    with ExitStack() as stack:
        urls = [stack.enter_context(migrated_postgres_database(PG_ADMIN_DSN)) for _ in SERVINGS]
        for url in urls:
            running_job(url)
        env = env_of(certs_server.url, target.url)
        yield stack.enter_context(servings(env, urls, start_server))


def running_job(url: str) -> None:
    """The job the reports name, running under its claim for an hour (as a claim leaves it)."""
    engine = create_engine(url, poolclass=NullPool)
    now = utcnow()
    row = {"kind": REPORT_KIND, "payload": {}, "status": "running", "priority": 0, "run_at": now,
           "attempts": 1, "claimed_by": REPORT_CLAIM, "lease_until": now + timedelta(hours=1),
           "created_at": now, "updated_at": now}  # fmt: skip
    try:
        with engine.begin() as connection:
            inserted = connection.execute(insert(jobs).values(**row).returning(jobs.c.id))
            assert inserted.scalar_one() == REPORTED_JOB
    finally:
        engine.dispose()


def excused(serving: str, probe: Probe, answer: Answer) -> bool:
    """A refusal the server makes before the app, where the others' app answers."""
    if serving == "gunicorn" and probe.method != probe.method.upper():
        return answer.status == 400
    return serving == "wsgiref" and probe.chunked and answer.status == 411


def decided(answer: Answer) -> Answer:
    document = json.loads(answer.body)
    return Answer(answer.status, f"{document['outcome']} {document.get('key')}".encode())


def differences(probe: Probe, answers: dict[str, Answer]) -> list[str]:
    compared = {name: a for name, a in answers.items() if not excused(name, probe, a)}
    if len(set(compared.values())) <= 1:
        return []
    return [f"{probe.cls} / {probe.name}: " + "; ".join(f"{n}={a}" for n, a in answers.items())]


def test_the_hostile_corpus_gets_one_answer_everywhere_and_starts_nothing(
    four: dict[str, Serving], target: PyTarget, google_key: SigningKey
) -> None:
    kit = Kit(google_key)
    before = {name: serving.rows() for name, serving in four.items()}
    found: list[str] = []
    summary: dict[str, Counter[str]] = defaultdict(Counter)
    for probe in hostile(kit) + job_api(kit) + header_names(kit):
        answers = {name: serving.send(probe.raw) for name, serving in four.items()}
        found += differences(probe, answers)
        found += [f"{probe.name}: {n} answered {a}" for n, a in answers.items() if a.status < 400]
        summary[probe.cls]["requests"] += 1
        for name, answer in answers.items():
            summary[probe.cls][f"{name} {answer.status}"] += 1
    for cls, counts in summary.items():
        print(cls, dict(sorted(counts.items())))
    assert found == []
    assert {name: serving.rows() for name, serving in four.items()} == before
    assert target.received == []


def test_valid_requests_get_one_answer_everywhere(
    four: dict[str, Serving], google_key: SigningKey
) -> None:
    """Compared by status, outcome and key (a run's timings differ)."""
    kit = Kit(google_key)
    found: list[str] = []
    outcomes = []
    for probe in controls(kit) + job_controls(kit):
        answers = {name: decided(serving.send(probe.raw)) for name, serving in four.items()}
        found += differences(probe, answers)
        outcomes.append((probe.name, answers["werkzeug"].status))
    assert found == []
    assert outcomes == [
        ("signed tick", 200), ("same tick again", 200), ("Cloud Scheduler tick", 200),
        ("push", 200), ("signed hook", 200), ("chunked signed tick over 64 KiB", 413),
        ("the target's heartbeat", 200),
        ("job: enqueue", 201), ("job: the same key again", 200), ("job: read", 200),
        ("job: cancel", 200), ("job: retry", 200), ("job: enqueue with an OIDC token", 201),
    ]  # fmt: skip


def test_a_source_starts_only_what_it_is_for_everywhere(
    four: dict[str, Serving], target: PyTarget, google_key: SigningKey
) -> None:
    """Authenticated pushes from a subscription that may not start what they name: the same
    answer everywhere (200, recorded refused under a key of its own, so the redelivery is a
    duplicate and the genuine event keeps its key), and nothing reaches the target."""
    found: list[str] = []
    for probe in wrong_source(Kit(google_key)):
        answers = {name: decided(serving.send(probe.raw)) for name, serving in four.items()}
        found += differences(probe, answers)
        found += [
            f"{probe.name}: {name} answered {answer}"
            for name, answer in answers.items()
            if answer.status != 200 or not answer.body.startswith(b"dead refused:")
        ]
    assert found == []
    assert target.received == []
    for serving in four.values():
        rows = serving.rows()
        assert rows.get("jobs", 0) == 1 and rows.get("warm_runs", 0) == 0, rows  # the reported
