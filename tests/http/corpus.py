"""The hostile corpus of the front door: requests with no valid credentials, by class, and a few
valid ones (``controls``) that show each serving really runs what it should.

A class is a function of the ``Kit`` (``tests.http.corpus_kit``: tokens, signatures, the time)
returning its probes, in the module of its subject (``corpus_headers``, ``corpus_framing``,
``corpus_credentials``, ``corpus_jobs``); add one to ``CLASSES`` (a "wrong subscription" class of
pushes, when sources are declared, goes here too).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.http.corpus_credentials import bad_tokens, confusion, forged_slots
from tests.http.corpus_framing import bodies, method_case, path_variants
from tests.http.corpus_headers import header_case, repeated_and_empty
from tests.http.corpus_jobs import job_reports
from tests.http.corpus_kit import (
    HOOK_SECRET,
    JSON,
    REPORT_CLAIM,
    REPORT_SECRET,
    REPORTED_JOB,
    TICK_SECRET,
    Kit,
    Probe,
    push_body,
    tick_body,
)

CLASSES: tuple[Callable[[Kit], list[Probe]], ...] = (
    repeated_and_empty, header_case, method_case, path_variants, forged_slots, bodies,
    bad_tokens, confusion, job_reports,
)  # fmt: skip


def hostile(kit: Kit) -> list[Probe]:
    return [probe for build in CLASSES for probe in build(kit)]


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
