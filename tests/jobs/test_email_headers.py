"""An email job's extra ``headers``: names are RFC 5322 field names and nothing carries a line
break, so a payload cannot inject a header line (``Bcc: ...``). A bad header is a permanent
failure whose reason says which header and why; the SMTP server is never contacted."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from bench.support.smtp_server import Recorder
from consumer import enqueue
from consumer.jobs.model import Status
from consumer.jobs.store import JobStore
from consumer.pipeline.extensions import JobKinds
from tests.jobs.conftest import sweep
from tests.jobs.test_email import MAIL, db, kinds, smtp_settings

__all__ = ["db", "kinds"]  # fixtures shared with test_email


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X-A\r\nBcc": "evil@attacker.example"}, "not a valid field name"),
        ({"Bcc: evil@attacker.example\r\nX-B": "1"}, "not a valid field name"),
        ({"X-Tag\n": "1"}, "not a valid field name"),
        ({"X Space": "1"}, "not a valid field name"),
        ({"X:Colon": "1"}, "not a valid field name"),
        ({"X-Ünicode": "1"}, "not a valid field name"),
        ({"": "1"}, "not a valid field name"),
        ({"X-Ok": "a\r\nBcc: evil@attacker.example"}, "line break"),
        ({"X-Ok": "a\nBcc: evil@attacker.example"}, "line break"),
        ({"X-Ok": "a\rb"}, "line break"),
        (["X-Ok", "1"], "must be an object"),
        ({"X-Ok": {"nested": 1}}, "must map header names to strings"),
    ],
)
def test_a_bad_header_is_dead_with_its_reason(
    db: Engine, kinds: JobKinds, smtp: Recorder, headers: Any, reason: str
) -> None:
    job_id = enqueue(db, "email", {**MAIL, "headers": headers}).job_id
    assert sweep(smtp_settings(db, smtp.port), db, kinds).dead == 1
    job = JobStore(db).get(job_id or 0)
    assert job and job.status is Status.DEAD
    assert "Permanent" in (job.last_error or "") and reason in (job.last_error or "")
    assert "evil@attacker.example" not in str(smtp.messages) and smtp.peers == set()


def test_good_headers_are_sent(db: Engine, kinds: JobKinds, smtp: Recorder) -> None:
    headers = {"X-Campaign": "spring", "List-Unsubscribe": "<mailto:u@shop.example>"}
    enqueue(db, "email", {**MAIL, "headers": headers})
    assert sweep(smtp_settings(db, smtp.port), db, kinds).done == 1
    (message,) = smtp.messages
    assert message["X-Campaign"] == "spring" and message["Bcc"] is None


@pytest.mark.parametrize("name", ["Bcc", "bcc", "Cc", "From", "Sender", "Reply-To", "To"])
def test_headers_cannot_repeat_what_the_fields_set(
    db: Engine, kinds: JobKinds, smtp: Recorder, name: str
) -> None:
    payload = {**MAIL, "headers": {name: "spy@attacker.example"}}
    job_id = enqueue(db, "email", payload).job_id
    assert job_id is not None
    sweep(smtp_settings(db, smtp.port), db, kinds)
    job = JobStore(db).get(job_id)
    assert job is not None and job.status is Status.DEAD
    assert "is set by the message's own fields" in (job.last_error or "")
    assert smtp.peers == set()
