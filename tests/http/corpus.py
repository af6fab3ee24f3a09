"""The hostile corpus of the front door: requests with no valid credentials, by class, and a few
valid ones (``controls``) that show each serving really runs what it should.

A class is a function of the ``Kit`` (tokens, signatures, the time) returning its probes; add one
to ``CLASSES`` (a "wrong subscription" class of pushes, when sources are declared, goes here too).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from consumer.auth.signature import request_message, sign
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import ACCOUNT, AUDIENCE, SigningKey, claims, unsigned

TICK_SECRET = "tick-secret-0123456789"
HOOK_SECRET = "hook-secret-0123456789"
TICK_AUDIENCE = "https://consumer.example.com/ticks"
SCHEDULER = "scheduler@project.iam.gserviceaccount.com"
JOB_SECRET = "job-api-secret-0123456789"
JOB_AUDIENCE = "https://consumer.example.com/jobs"
JOB_CALLER = "orders@project.iam.gserviceaccount.com"
TASKS = ("sweep", "cleanup", "invented-task", "billing")
"""A built-in task, another, one nobody declared, and one an HTTP target serves."""
Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Probe:
    cls: str
    name: str
    method: str
    path: str
    headers: Headers = ()
    body: bytes = b""
    chunked: bool = False
    length: str | None = None
    """A ``Content-Length`` to declare instead of the body's own."""

    def target(self, prefix: str) -> str:
        """The path below ``prefix``, its leading slashes kept in front (``//push`` is sent as
        ``//consumer/push``: the same request to a mounted app)."""
        rest = self.path.lstrip("/")
        lead = self.path[: len(self.path) - len(rest)]
        return f"{lead}{prefix.lstrip('/')}/{rest}" if prefix else self.path

    def raw(self, prefix: str) -> bytes:
        lines = [f"{self.method} {self.target(prefix)} HTTP/1.1", "Host: 127.0.0.1",
                 "Connection: close"]  # fmt: skip
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.chunked:
            lines.append("Transfer-Encoding: chunked")
            pieces = [self.body[i : i + 16384] for i in range(0, len(self.body), 16384)]
            payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        else:
            lines.append(f"Content-Length: {self.length or len(self.body)}")
            payload = self.body
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


@dataclass
class Kit:
    key: SigningKey
    now: int = field(default_factory=lambda: int(time.time()))

    def token(self, **changes: object) -> str:
        return self.key.sign(claims(**changes))

    def tick_token(self, **changes: object) -> str:
        return self.token(**{"aud": TICK_AUDIENCE, "email": SCHEDULER, **changes})

    def signed(self, secret: str, body: bytes, at: int | None = None) -> Headers:
        stamp = self.now if at is None else at
        return (("X-Consumer-Timestamp", str(stamp)),
                ("X-Consumer-Signature", f"v1={sign(secret, stamp, body)}"))  # fmt: skip

    def job_signed(
        self, method: str, path: str, body: bytes, secret: str = JOB_SECRET, at: int | None = None
    ) -> Headers:
        """A job API request's signature: over its method and path too (docs/job-api.md)."""
        return self.signed(secret, request_message(method, path, body), at)

    def schedule(self, at: int | None = None) -> tuple[str, str]:
        moment = datetime.fromtimestamp(self.now if at is None else at, UTC)
        return ("X-CloudScheduler-ScheduleTime", moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


JUNK_SIGNED = (("X-Consumer-Timestamp", "1700000000"), ("X-Consumer-Signature", "v1=" + "ab" * 32))
JSON = (("Content-Type", "application/json"),)


def tick_body(task: str) -> bytes:
    return json.dumps({"task": task}).encode()


def push_body(message_id: str = "corpus-1") -> bytes:
    return json.dumps(wrapped_body(data=b"hello", message_id=message_id)).encode()


def repeated_and_empty(kit: Kit) -> list[Probe]:
    """The reported tick (two ``Authorization`` headers, the last empty, junk signature headers)
    against every kind of task, and the other ways a header can be sent twice or empty."""
    cls = "repeated and empty headers"
    probes = [
        Probe(cls, f"unsigned tick, two Authorization (last empty): {task}", "POST",
              f"/ticks/{task}", (("Authorization", "Bearer x"), ("Authorization", ""),
                                 *JUNK_SIGNED, *JSON), tick_body(task))
        for task in TASKS
    ]  # fmt: skip
    good = kit.token()
    probes += [
        Probe(cls, "push: a valid token, then an empty Authorization", "POST", "/push",
              (("Authorization", f"Bearer {good}"), ("Authorization", ""), *JSON), push_body()),
        Probe(cls, "push: two valid tokens", "POST", "/push",
              (("Authorization", f"Bearer {good}"), ("Authorization", f"Bearer {good}"), *JSON),
              push_body()),
        Probe(cls, "push: an empty Authorization", "POST", "/push",
              (("Authorization", ""), *JSON), push_body()),
        Probe(cls, "tick: two empty Authorization headers", "POST", "/ticks/sweep",
              (("Authorization", ""), ("Authorization", ""), *JUNK_SIGNED), tick_body("sweep")),
        Probe(cls, "tick: a valid signature, then a second timestamp", "POST", "/ticks/sweep",
              (*kit.signed(TICK_SECRET, tick_body("sweep")), ("X-Consumer-Timestamp", "1")),
              tick_body("sweep")),
        Probe(cls, "tick: a valid token, two schedule times", "POST", "/ticks/sweep",
              (("Authorization", f"Bearer {kit.tick_token()}"), kit.schedule(),
               kit.schedule(kit.now - 3600)), tick_body("sweep")),
        Probe(cls, "tick: empty signature headers", "POST", "/ticks/sweep",
              (("X-Consumer-Timestamp", ""), ("X-Consumer-Signature", "")), tick_body("sweep")),
        Probe(cls, "hook: two timestamps", "POST", "/hooks/deploy",
              (*JUNK_SIGNED, ("X-Consumer-Timestamp", str(kit.now))), b'{"service":"a"}'),
        Probe(cls, "hook: an empty signature", "POST", "/hooks/deploy",
              (("X-Consumer-Timestamp", str(kit.now)), ("X-Consumer-Signature", "")), b"{}"),
    ]  # fmt: skip
    return probes


def header_case(kit: Kit) -> list[Probe]:
    cls = "header-name case"
    forged = unsigned(claims())
    return [
        Probe(cls, "AUTHORIZATION upper-case, forged token", "POST", "/push",
              (("AUTHORIZATION", f"Bearer {forged}"), *JSON), push_body()),
        Probe(cls, "authorization and Authorization", "POST", "/ticks/sweep",
              (("authorization", "Bearer x"), ("Authorization", ""), *JUNK_SIGNED),
              tick_body("sweep")),
        Probe(cls, "x-consumer-signature lower-case, junk", "POST", "/ticks/cleanup",
              (("x-consumer-timestamp", str(kit.now)), ("x-consumer-signature", "v1=00")),
              tick_body("cleanup")),
        Probe(cls, "X-CLOUDSCHEDULER-SCHEDULETIME without a token", "POST", "/ticks/sweep",
              (("X-CLOUDSCHEDULER-SCHEDULETIME", "2020-01-01T00:00:00Z"),), tick_body("sweep")),
    ]  # fmt: skip


def method_case(kit: Kit) -> list[Probe]:
    cls = "method case"
    forged = kit.key.hs256_with_public_key(claims(aud=TICK_AUDIENCE, email=SCHEDULER))
    probes = [
        Probe(cls, "post /push, no token", "post", "/push", JSON, push_body()),
        Probe(cls, "Post /push, no token", "Post", "/push", JSON, push_body()),
        Probe(cls, "post /ticks/cleanup, forged token", "post", "/ticks/cleanup",
              (("Authorization", f"Bearer {forged}"),), tick_body("cleanup")),
        Probe(cls, "post /hooks/deploy, junk signature", "post", "/hooks/deploy", JUNK_SIGNED,
              b'{"service":"a","release":"1"}'),
    ]  # fmt: skip
    for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "get", "put"):
        for path in ("/push", "/ticks/sweep", "/hooks/deploy"):
            probes.append(Probe(cls, f"{method} {path}", method, path, JUNK_SIGNED, b""))
    return probes


def path_variants(kit: Kit) -> list[Probe]:
    cls = "path variants"
    paths = [
        "/push/", "//push", "/Push", "/PUSH", "/%70ush", "/push%2F", "/push%00", "/./push",
        "/ticks/", "/ticks", "/ticks//sweep", "/ticks/sweep/", "/Ticks/sweep", "/ticks/a%2Fb",
        "/ticks/%2e%2e", "/ticks/sw%65ep", "/hooks/deploy/", "/hooks//deploy", "/HOOKS/deploy",
        "/hooks/%64eploy", "/push?token=", "/push;x", "/nowhere",
    ]  # fmt: skip
    return [Probe(cls, path, "POST", path, (*JUNK_SIGNED, *JSON), tick_body("sweep"))
            for path in paths]  # fmt: skip


def forged_slots(kit: Kit) -> list[Probe]:
    """Ways to choose a tick's slot without the right to."""
    cls = "forged slots"
    body = tick_body("sweep")
    future = kit.now + 7 * 24 * 3600
    return [
        Probe(cls, "schedule time, no token", "POST", "/ticks/sweep", (kit.schedule(future),),
              body),
        Probe(cls, "signed by a wrong secret", "POST", "/ticks/sweep",
              kit.signed("not-the-secret-0123456789", body), body),
        Probe(cls, "a future timestamp, wrong secret", "POST", "/ticks/sweep",
              kit.signed("not-the-secret-0123456789", body, future), body),
        Probe(cls, "the hook's secret on a tick", "POST", "/ticks/sweep",
              kit.signed(HOOK_SECRET, body), body),
        Probe(cls, "a signed tick replayed to another task", "POST", "/ticks/cleanup",
              kit.signed(TICK_SECRET, body), body),
        Probe(cls, "a push token on a tick, with a schedule time", "POST", "/ticks/sweep",
              (("Authorization", f"Bearer {kit.token()}"), kit.schedule(future)), body),
        Probe(cls, "a tick token of a stranger", "POST", "/ticks/sweep",
              (("Authorization", f"Bearer {kit.tick_token(email='x@evil.example')}"),
               kit.schedule()), body),
    ]  # fmt: skip


def bodies(kit: Kit) -> list[Probe]:
    """Chunked and oversized bodies to routes that take small ones, unauthenticated."""
    cls = "chunked and oversized bodies"
    big = b'{"task":"sweep","pad":"' + b"x" * 80_000 + b'"}'
    return [
        Probe(cls, "chunked 80 KB tick, unsigned", "POST", "/ticks/sweep", (), big, chunked=True),
        Probe(cls, "chunked 80 KB tick, junk signature", "POST", "/ticks/sweep", JUNK_SIGNED,
              big, chunked=True),
        Probe(cls, "chunked 80 KB hook, junk signature", "POST", "/hooks/deploy", JUNK_SIGNED,
              big, chunked=True),
        Probe(cls, "chunked push, no token", "POST", "/push", JSON, push_body(), chunked=True),
        Probe(cls, "declared 70 KB tick, junk signature", "POST", "/ticks/sweep", JUNK_SIGNED,
              length="70000"),
        Probe(cls, "declared 20 MiB push, no token", "POST", "/push", JSON, length="20971520"),
        Probe(cls, "declared 70 KB hook, junk signature", "POST", "/hooks/deploy", JUNK_SIGNED,
              length="70000"),
        Probe(cls, "80 KB tick, junk signature", "POST", "/ticks/sweep", JUNK_SIGNED, big),
    ]  # fmt: skip


def bad_tokens(kit: Kit) -> list[Probe]:
    cls = "bad tokens"
    tokens = {
        "garbage": "not-a-jwt",
        "alg none": unsigned(claims(), kid=kit.key.kid),
        "HS256 keyed with the public key": kit.key.hs256_with_public_key(claims()),
        "expired": kit.token(exp=kit.now - 7200, iat=kit.now - 10800),
        "wrong audience": kit.token(aud="https://elsewhere.example.com"),
        "wrong account": kit.token(email="mallory@evil.example"),
        "unverified email": kit.token(email_verified=False),
        "foreign issuer": kit.token(iss="https://evil.example"),
        "unknown key": SigningKey("other-key").sign(claims()),
        "Basic": "Basic dXNlcjpwYXNz",
    }
    probes = []
    for name, token in tokens.items():
        value = token if token.startswith("Basic") else f"Bearer {token}"
        probes.append(Probe(cls, f"push: {name}", "POST", "/push",
                            (("Authorization", value), *JSON), push_body()))  # fmt: skip
        tick = (("Authorization", value), kit.schedule())
        probes.append(Probe(cls, f"tick: {name}", "POST", "/ticks/sweep", tick, tick_body("sweep")))
    return probes


def confusion(kit: Kit) -> list[Probe]:
    """A request that carries one scheme's credential and the other's headers."""
    cls = "HMAC/OIDC confusion"
    body = tick_body("sweep")
    return [
        Probe(cls, "Basic + junk signature", "POST", "/ticks/sweep",
              (("Authorization", "Basic x"), *JUNK_SIGNED), body),
        Probe(cls, "empty Authorization + wrong-secret signature", "POST", "/ticks/sweep",
              (("Authorization", ""), *kit.signed("wrong-secret-0123456789", body)), body),
        Probe(cls, "forged token + valid signature", "POST", "/ticks/sweep",
              (("Authorization", f"Bearer {unsigned(claims())}"),
               *kit.signed(TICK_SECRET, body)), body),
        Probe(cls, "valid tick signature on the hook", "POST", "/hooks/deploy",
              kit.signed(TICK_SECRET, b'{"service":"a","release":"1"}'),
              b'{"service":"a","release":"1"}'),
        Probe(cls, "valid tick token on the push route", "POST", "/push",
              (("Authorization", f"Bearer {kit.tick_token()}"), *JSON), push_body()),
        Probe(cls, "signature headers on a push", "POST", "/push",
              (*kit.signed(TICK_SECRET, push_body()), *JSON), push_body()),
        Probe(cls, "Authorization with a comma", "POST", "/ticks/sweep",
              (("Authorization", f"Bearer {kit.tick_token()}, x"), kit.schedule()), body),
    ]  # fmt: skip


REPORT_SECRET = "report-target-secret-0123456789"
"""The HMAC secret of the job target ``reporter`` (``test_front_door_corpus``'s settings)."""
REPORT_KIND = "corpus-report"
REPORT_CLAIM = "corpus-host/1/claim"
REPORTED_JOB = 1
"""Each serving's database holds this job, running under ``REPORT_CLAIM``, served by the
target: a report's refusals are decided against a real job."""


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


CLASSES: tuple[Callable[[Kit], list[Probe]], ...] = (
    repeated_and_empty, header_case, method_case, path_variants, forged_slots, bodies,
    bad_tokens, confusion, job_reports,
)  # fmt: skip


def hostile(kit: Kit) -> list[Probe]:
    return [probe for build in CLASSES for probe in build(kit)]


JOBS_SUBSCRIPTION = "projects/corpus/subscriptions/jobs-push"
"""Declared for the ``job`` route only (``test_front_door_corpus``'s ``CONSUMER_SOURCES``)."""


def wrong_source(kit: Kit) -> list[Probe]:
    """Authenticated pushes (Pub/Sub's own token) that try to start what their subscription is
    not for: a jobs-topic publisher naming a tick, a run now, a continuation, a deploy and a
    storage event, and an unsigned run now on a subscription that may start ticks. Each is
    refused, recorded under its own ``refused:`` key, and starts nothing."""
    cls = "wrong source"
    attempts = {
        "tick": {"task": "billing"},
        "run now": {"task": "billing", "run_now": "x1"},
        "continuation": {"task": "sweep", "continuation": "c1"},
        "deploy": {"event": "deploy", "service": "web", "release": "r-forged"},
        "storage": {"eventType": "OBJECT_FINALIZE", "bucketId": "b", "objectId": "o",
                    "objectGeneration": "1", "payloadFormat": "NONE"},
    }  # fmt: skip
    probes = []
    for n, (name, attributes) in enumerate(attempts.items()):
        body = wrapped_body(attributes=attributes, message_id=f"wrong-{n}",
                            subscription=JOBS_SUBSCRIPTION)  # fmt: skip
        probes.append(Probe(cls, f"jobs-topic message as a {name}", "POST", "/push",
                            (("Authorization", f"Bearer {kit.token()}"), *JSON),
                            json.dumps(body).encode()))  # fmt: skip
    unsigned = wrapped_body(attributes={"task": "billing", "run_now": "x2"}, message_id="wrong-9")
    probes.append(Probe(cls, "unsigned run now on the ticks' subscription", "POST", "/push",
                        (("Authorization", f"Bearer {kit.token()}"), *JSON),
                        json.dumps(unsigned).encode()))  # fmt: skip
    return probes


def controls(kit: Kit) -> list[Probe]:
    """Valid requests: each serving runs them, on its own database, alike."""
    cls = "valid (control)"
    body = tick_body("sweep")
    hook = b'{"service":"orders","release":"r-1"}'
    beat = json.dumps({"id": REPORTED_JOB}).encode()
    return [
        Probe(cls, "signed tick", "POST", "/ticks/sweep", (*kit.signed(TICK_SECRET, body), *JSON),
              body),
        Probe(cls, "same tick again", "POST", "/ticks/sweep",
              (*kit.signed(TICK_SECRET, body), *JSON), body),
        Probe(cls, "Cloud Scheduler tick", "POST", "/ticks/cleanup",
              (("Authorization", f"Bearer {kit.tick_token()}"), kit.schedule()), b""),
        Probe(cls, "push", "POST", "/push", (("Authorization", f"Bearer {kit.token()}"), *JSON),
              push_body("control-1")),
        Probe(cls, "signed hook", "POST", "/hooks/deploy", kit.signed(HOOK_SECRET, hook), hook),
        Probe(cls, "chunked signed tick over 64 KiB", "POST", "/ticks/sweep",
              kit.signed(TICK_SECRET, b" " * 70_000 + body), b" " * 70_000 + body, chunked=True),
        Probe(cls, "the target's heartbeat", "POST", f"/jobs/{REPORTED_JOB}/heartbeat",
              (("X-Consumer-Claim", REPORT_CLAIM), *kit.signed(REPORT_SECRET, beat)), beat),
    ]  # fmt: skip


__all__ = ["ACCOUNT", "AUDIENCE", "Kit", "Probe", "controls", "hostile", "wrong_source"]
