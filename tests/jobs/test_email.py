"""The ``email`` job kind against a real SMTP server (aiosmtpd): plain, STARTTLS and implicit
TLS with credentials; the maildir default; Message-IDs derived from the job."""

from __future__ import annotations

import mailbox
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.support import smtp_server
from bench.support.smtp_server import Recorder
from consumer import enqueue
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.email import build_message, message_id
from consumer.jobs.model import Status
from consumer.jobs.store import JobStore
from consumer.jobs.tick import register
from consumer.pipeline.extensions import JobKinds
from consumer.pipeline.registry import Registry
from tests.conftest import free_port
from tests.jobs.conftest import sweep

MAIL = {"to": "ann@example.com", "subject": "Your order", "text": "It shipped."}


@pytest.fixture
def db(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()


@pytest.fixture
def kinds() -> JobKinds:
    registry = Registry()
    register(registry)
    return registry.job_kinds


def smtp_settings(db: Engine, port: int, **changes: Any) -> Settings:
    settings = Settings.of(
        database_url=str(db.url),
        local_mode=True,
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_security="none",
        mail_from="Shop <shop@shop.example>",
    )
    return settings.with_values(**changes)


def test_a_batch_is_sent_over_one_connection_with_job_derived_message_ids(
    db: Engine, kinds: JobKinds, smtp: Recorder
) -> None:
    ids = [enqueue(db, "email", {**MAIL, "to": [f"u{i}@example.com"]}).job_id for i in range(5)]
    html = enqueue(db, "email", {**MAIL, "html": "<p>It shipped.</p>", "cc": "c@example.com"})
    summary = sweep(smtp_settings(db, smtp.port), db, kinds)
    assert (summary.done, summary.dead, summary.retried) == (6, 0, 0)
    assert len(smtp.peers) == 1, "each batch should reuse one SMTP session"
    jobs_by_id = {job_id: JobStore(db).get(job_id) for job_id in [*ids, html.job_id]}
    expected = {message_id(job, "shop@shop.example") for job in jobs_by_id.values() if job}
    assert set(smtp.message_ids()) == expected and len(expected) == 6
    first = smtp.messages[0]
    assert first["From"] == "Shop <shop@shop.example>" and first["Subject"] == "Your order"
    assert first["X-Consumer-Job"] == str(ids[0])
    assert smtp.messages[-1].is_multipart() and smtp.messages[-1]["Cc"] == "c@example.com"


def test_the_message_id_is_stable_per_job_and_unique_across_jobs(db: Engine) -> None:
    settings = smtp_settings(db, 25)
    first, second = (enqueue(db, "email", MAIL).job_id for _ in range(2))
    job1, job2 = JobStore(db).get(first or 0), JobStore(db).get(second or 0)
    assert job1 and job2
    one, again = build_message(job1, settings), build_message(job1, settings)
    assert (
        one["Message-ID"]
        == again["Message-ID"]
        == f"<job-{first}.{job1.created_at:%Y%m%d%H%M%S}@shop.example>"
    )
    assert build_message(job2, settings)["Message-ID"] != one["Message-ID"]


@pytest.mark.parametrize(
    "payload",
    [
        {"subject": "no recipient"},
        {"to": "not an address"},
        {"to": 42},
        {"to": "a@example.com", "subject": "line\nbreak"},
        ["not", "an", "object"],
    ],
)
def test_an_invalid_payload_is_dead_without_touching_smtp(
    db: Engine, kinds: JobKinds, smtp: Recorder, payload: Any
) -> None:
    job_id = enqueue(db, "email", payload).job_id
    assert sweep(smtp_settings(db, smtp.port), db, kinds).dead == 1
    job = JobStore(db).get(job_id or 0)
    assert job and job.status is Status.DEAD and "Permanent" in (job.last_error or "")
    assert smtp.messages == [] and smtp.peers == set()


@pytest.mark.parametrize(
    ("reply", "status"), [("550 no such mailbox", "dead"), ("451 try again later", "pending")]
)
def test_smtp_refusals_are_permanent_or_retried_by_code(
    db: Engine, kinds: JobKinds, smtp: Recorder, reply: str, status: str
) -> None:
    smtp.reply = reply
    job_id = enqueue(db, "email", MAIL).job_id
    sweep(smtp_settings(db, smtp.port), db, kinds)
    job = JobStore(db).get(job_id or 0)
    assert job and job.status == status and reply.split()[0] in (job.last_error or "")


@pytest.mark.parametrize(
    ("reply", "status"),
    [("550 no such user", "dead"), ("450 greylisted, come back later", "pending")],
)
def test_refused_recipients_are_permanent_or_retried_by_code(
    db: Engine, kinds: JobKinds, smtp: Recorder, reply: str, status: str
) -> None:
    smtp.rcpt_reply = reply
    first, second = (enqueue(db, "email", {**MAIL, "subject": s}).job_id for s in ("a", "b"))
    sweep(smtp_settings(db, smtp.port), db, kinds)
    for job_id in (first, second):  # the refusal of the first did not poison the session
        job = JobStore(db).get(job_id or 0)
        assert job and job.status == status and reply.split()[0] in (job.last_error or "")
    smtp.rcpt_reply = ""


def test_an_unreachable_server_is_retried(db: Engine, kinds: JobKinds) -> None:
    job_id = enqueue(db, "email", MAIL).job_id
    summary = sweep(smtp_settings(db, free_port(), smtp_timeout_seconds=2), db, kinds)
    job = JobStore(db).get(job_id or 0)
    assert summary.retried == 1 and job and job.status is Status.PENDING


@pytest.fixture
def tls_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A self-signed certificate the client trusts (through SSL_CERT_FILE)."""
    cert, key = smtp_server.self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return cert, key


@pytest.mark.parametrize("security", ["starttls", "ssl"])
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
def test_tls_with_credentials(
    db: Engine, kinds: JobKinds, tls_files: tuple[Path, Path], security: str
) -> None:
    recorder = Recorder()
    context = smtp_server.server_context(*tls_files)
    tls: dict[str, Any] = (
        {"tls_context": context, "require_starttls": True}
        if security == "starttls"
        # aiosmtpd only counts STARTTLS as TLS; with implicit TLS the whole session is encrypted.
        else {"ssl_context": context, "auth_require_tls": False}
    )
    controller = smtp_server.start(
        recorder,
        authenticator=smtp_server.authenticator("mailer", "s3cret"),
        auth_required=True,
        **tls,
    )
    try:
        good = smtp_settings(
            db,
            recorder.port,
            smtp_security=security,
            smtp_username="mailer",
            smtp_password="s3cret",
        )
        enqueue(db, "email", MAIL)
        assert sweep(good, db, kinds).done == 1
        assert len(recorder.messages) == 1
        enqueue(db, "email", MAIL)
        bad = good.with_values(smtp_password="wrong")
        assert sweep(bad, db, kinds).retried == 1  # a credentials problem is not the job's fault
        assert len(recorder.messages) == 1
    finally:
        controller.stop()


def test_without_an_smtp_host_mail_goes_to_the_maildir(
    db: Engine, kinds: JobKinds, tmp_path: Path
) -> None:
    settings = Settings.of(
        database_url=str(db.url), local_mode=True, maildir_path=str(tmp_path / "md")
    )
    job_id = enqueue(db, "email", MAIL).job_id
    assert sweep(settings, db, kinds).done == 1
    (stored,) = mailbox.Maildir(tmp_path / "md", create=False)
    assert stored["To"] == "ann@example.com" and stored["Message-ID"].startswith(f"<job-{job_id}.")
