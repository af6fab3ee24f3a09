"""What every class of the hostile corpus (``tests.http.corpus``) builds on: the servings'
secrets and identities, a ``Probe`` (one raw HTTP/1.1 request) and the ``Kit`` that signs and
dates them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from consumer.auth.signature import request_message, sign
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import SigningKey, claims

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


REPORT_SECRET = "report-target-secret-0123456789"
"""The HMAC secret of the job target ``reporter`` (``test_front_door_corpus``'s settings)."""
REPORT_KIND = "corpus-report"
REPORT_CLAIM = "corpus-host/1/claim"
REPORTED_JOB = 1
"""Each serving's database holds this job, running under ``REPORT_CLAIM``, served by the
target: a report's refusals are decided against a real job."""
