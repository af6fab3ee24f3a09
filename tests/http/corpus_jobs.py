"""The hostile corpus's (``tests.http.corpus``) classes about jobs: reports on a running job that
are not its target's (among the corpus's ``CLASSES``), and the job API with its valid requests
(sent to every serving by ``test_front_door_corpus`` with the other classes)."""

from __future__ import annotations

import json

from tests.auth.tokens import claims, unsigned
from tests.http.corpus_kit import (
    HOOK_SECRET,
    JOB_AUDIENCE,
    JOB_CALLER,
    JOB_SECRET,
    JSON,
    JUNK_SIGNED,
    REPORT_CLAIM,
    REPORT_SECRET,
    REPORTED_JOB,
    TICK_SECRET,
    Kit,
    Probe,
)


def job_reports(kit: Kit) -> list[Probe]:
    """Reports on a running job that are not its target's: unsigned, signed with another
    secret, a token instead of a signature, a signed body naming another job, a signature from
    another time, the right signature under a stale claim, no claim; and paths and methods the
    rows do not take. None changes the job (docs/long-running-jobs.md)."""
    cls = "job reports"
    done = json.dumps({"id": REPORTED_JOB, "outcome": "done"}).encode()
    other = json.dumps({"id": REPORTED_JOB + 1, "outcome": "done"}).encode()
    claim = ("X-Consumer-Claim", REPORT_CLAIM)
    path = f"/jobs/{REPORTED_JOB}/complete"
    return [
        Probe(cls, "unsigned completion", "POST", path, (claim, *JSON), done),
        Probe(cls, "junk signature", "POST", path, (claim, *JUNK_SIGNED, *JSON), done),
        Probe(cls, "another secret", "POST", path, (claim, *kit.signed(HOOK_SECRET, done)), done),
        Probe(cls, "a push token instead", "POST", path,
              (claim, ("Authorization", f"Bearer {kit.token()}"), *JSON), done),
        Probe(cls, "signed body naming another job", "POST", path,
              (claim, *kit.signed(REPORT_SECRET, other)), other),
        Probe(cls, "signed an hour ago", "POST", path,
              (claim, *kit.signed(REPORT_SECRET, done, at=kit.now - 3600)), done),
        Probe(cls, "signed, stale claim", "POST", path,
              (("X-Consumer-Claim", "corpus-host/1/older"), *kit.signed(REPORT_SECRET, done)),
              done),
        Probe(cls, "signed, no claim", "POST", path, kit.signed(REPORT_SECRET, done), done),
        Probe(cls, "signed heartbeat, stale claim", "POST", f"/jobs/{REPORTED_JOB}/heartbeat",
              (("X-Consumer-Claim", "x"), *kit.signed(REPORT_SECRET, done)), done),
        Probe(cls, "unknown job", "POST", "/jobs/999999/complete",
              (claim, *kit.signed(REPORT_SECRET, done)), done),
        Probe(cls, "a key that is no id", "POST", "/jobs/..%2F1/complete",
              (claim, *kit.signed(REPORT_SECRET, done)), done),
        Probe(cls, "GET", "GET", path, (claim,)),
        Probe(cls, "trailing slash", "POST", path + "/", (claim, *kit.signed(REPORT_SECRET, done)),
              done),
        Probe(cls, "over the limit", "POST", path, (claim, *JUNK_SIGNED), b"{" * 100_000),
    ]  # fmt: skip


def job_api(kit: Kit) -> list[Probe]:
    """The job API: no valid credentials, credentials of another way in or for another request,
    the wrong method or path, oversized bodies, and validly signed bodies that are bad input.
    Every one is refused and stores nothing."""
    cls = "job API"
    body = json.dumps({"kind": "email", "payload": {"to": "a@example.com"}, "key": "c"}).encode()
    wrong = "not-the-job-secret-0123456789"
    bearer = lambda token: (("Authorization", f"Bearer {token}"), *JSON)  # noqa: E731
    job_token = kit.token(aud=JOB_AUDIENCE, email=JOB_CALLER)
    probes = [
        Probe(cls, "unsigned enqueue", "POST", "/jobs", JSON, body),
        Probe(cls, "wrong secret", "POST", "/jobs", (*kit.job_signed("POST", "/jobs", body, wrong),
              *JSON), body),
        Probe(cls, "stale timestamp", "POST", "/jobs",
              kit.job_signed("POST", "/jobs", body, at=kit.now - 3600), body),
        Probe(cls, "future timestamp", "POST", "/jobs",
              kit.job_signed("POST", "/jobs", body, at=kit.now + 3600), body),
        Probe(cls, "the body's signature alone (no method, no path)", "POST", "/jobs",
              kit.signed(JOB_SECRET, body), body),
        Probe(cls, "signed for another key", "DELETE", "/jobs/b",
              kit.job_signed("DELETE", "/jobs/a", b"")),
        Probe(cls, "signed as a read, sent as a cancel", "DELETE", "/jobs/a",
              kit.job_signed("GET", "/jobs/a", b"")),
        Probe(cls, "signed as a cancel, sent as a retry", "POST", "/jobs/a/retry",
              kit.job_signed("DELETE", "/jobs/a", b"")),
        Probe(cls, "the tick secret", "POST", "/jobs", kit.job_signed("POST", "/jobs", body,
              TICK_SECRET), body),
        Probe(cls, "the hook secret", "POST", "/jobs", kit.job_signed("POST", "/jobs", body,
              HOOK_SECRET), body),
        Probe(cls, "two timestamps", "POST", "/jobs", (*kit.job_signed("POST", "/jobs", body),
              ("X-Consumer-Timestamp", str(kit.now))), body),
        Probe(cls, "two Authorization headers", "GET", "/jobs/a",
              (("Authorization", f"Bearer {job_token}"), ("Authorization", f"Bearer {job_token}"))),
        Probe(cls, "an empty signature", "GET", "/jobs/a",
              (("X-Consumer-Timestamp", str(kit.now)), ("X-Consumer-Signature", ""))),
        Probe(cls, "Pub/Sub's push token", "POST", "/jobs", bearer(kit.token()), body),
        Probe(cls, "Cloud Scheduler's tick token", "POST", "/jobs", bearer(kit.tick_token()), body),
        Probe(cls, "a job token of a stranger", "POST", "/jobs",
              bearer(kit.token(aud=JOB_AUDIENCE, email="x@evil.example")), body),
        Probe(cls, "a forged job token + a valid signature", "POST", "/jobs",
              (("Authorization", f"Bearer {unsigned(claims(aud=JOB_AUDIENCE, email=JOB_CALLER))}"),
               *kit.job_signed("POST", "/jobs", body)), body),
        Probe(cls, "Basic", "GET", "/jobs/a", (("Authorization", "Basic dXNlcjpwYXNz"),)),
        Probe(cls, "declared 200 KB enqueue, junk signature", "POST", "/jobs", JUNK_SIGNED,
              length="200000"),
        Probe(cls, "chunked 200 KB enqueue, unsigned", "POST", "/jobs", (),
              b'{"kind":"email","pad":"' + b"x" * 200_000 + b'"}', chunked=True),
        Probe(cls, "declared 70 KB cancel, junk signature", "DELETE", "/jobs/a", JUNK_SIGNED,
              length="70000"),
    ]  # fmt: skip
    signed_bad = {
        "bad JSON": b'{"kind": "email",',
        "NaN in the body": b'{"kind": "email", "payload": {"n": NaN}}',
        "no object": b'["email"]',
        "unknown kind": b'{"kind": "no-such-kind"}',
        "payload an array": b'{"kind": "email", "payload": [1]}',
        "payload over the limit": b'{"kind": "email", "payload": {"text": "' + b"x" * 70_000
        + b'"}}',
        "a bad run_at": b'{"kind": "email", "run_at": "soon"}',
        "a key over 200 characters": b'{"kind": "email", "key": "' + b"k" * 201 + b'"}',
        "a key with a slash": b'{"kind": "email", "key": "a/b"}',
        "priority a string": b'{"kind": "email", "priority": "1"}',
        "max_attempts 0": b'{"kind": "email", "max_attempts": 0}',
    }  # fmt: skip
    probes += [Probe(cls, f"signed, {name}", "POST", "/jobs",
                     (*kit.job_signed("POST", "/jobs", bad), *JSON), bad)
               for name, bad in signed_bad.items()]  # fmt: skip
    for method, path in (("GET", "/jobs"), ("PUT", "/jobs"), ("PATCH", "/jobs/a"),
                         ("POST", "/jobs/a"), ("GET", "/jobs/a/retry"), ("PUT", "/jobs/a/retry"),
                         ("get", "/jobs/a")):  # fmt: skip
        probes.append(Probe(cls, f"{method} {path}", method, path,
                            kit.job_signed(method, path, b"")))  # fmt: skip
    for path in ("/jobs/", "/jobs//a", "/Jobs", "/jobs/a/retry/", "/jobs/a/b"):
        probes.append(Probe(cls, f"path {path}", "GET", path, kit.job_signed("GET", path, b"")))
    return probes


def job_controls(kit: Kit) -> list[Probe]:
    """The job API's valid requests: enqueue (a later job, so no sweep touches it), again,
    read, cancel, retry, and one with the caller's OIDC token."""
    cls = "valid (control)"
    job = {
        "kind": "email",
        "payload": {"to": "a@example.com"},
        "key": "ctl",
        "run_at": "2099-01-01T00:00:00Z",
    }
    body = json.dumps(job).encode()
    token = kit.token(aud=JOB_AUDIENCE, email=JOB_CALLER)
    by_token = json.dumps({**job, "key": "ctl-oidc"}).encode()
    return [
        Probe(cls, "job: enqueue", "POST", "/jobs", (*kit.job_signed("POST", "/jobs", body), *JSON),
              body),
        Probe(cls, "job: the same key again", "POST", "/jobs",
              (*kit.job_signed("POST", "/jobs", body), *JSON), body),
        Probe(cls, "job: read", "GET", "/jobs/ctl", kit.job_signed("GET", "/jobs/ctl", b"")),
        Probe(cls, "job: cancel", "DELETE", "/jobs/ctl",
              kit.job_signed("DELETE", "/jobs/ctl", b"")),
        Probe(cls, "job: retry", "POST", "/jobs/ctl/retry",
              kit.job_signed("POST", "/jobs/ctl/retry", b"")),
        Probe(cls, "job: enqueue with an OIDC token", "POST", "/jobs",
              (("Authorization", f"Bearer {token}"), *JSON), by_token),
    ]  # fmt: skip
