"""The classes of the hostile corpus (``tests.http.corpus``) about headers: a header sent twice
or empty, a name in another case, what authentication reads sent more than once (a repeated
``?token=`` or ``X-Consumer-Claim``), and a name with underscores, which is not its dashed twin
(``X_Consumer_Signature``, ``Authorization_``): gunicorn (by default) and Werkzeug's server drop
such a header, the bridge does too, and wsgiref maps it onto the dashed name's key; every probe
here is refused alike on the four servings whichever they do. The first two are among the
corpus's ``CLASSES``; ``header_names`` (the last two) is sent with them by
``test_front_door_corpus``."""

from __future__ import annotations

import json

from tests.auth.tokens import claims, unsigned
from tests.http.corpus_kit import (
    JOB_AUDIENCE,
    JOB_CALLER,
    JSON,
    JUNK_SIGNED,
    REPORT_CLAIM,
    REPORT_SECRET,
    REPORTED_JOB,
    TASKS,
    TICK_SECRET,
    Kit,
    Probe,
    push_body,
    tick_body,
)

REPORT = f"/jobs/{REPORTED_JOB}/heartbeat"


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


def single_valued(kit: Kit) -> list[Probe]:
    """A repeated ``?token=`` (the legacy push token: one layer could read the first, another
    the last) and a repeated claim on a target's report, each with otherwise valid credentials:
    400 before any handler, naming what was repeated."""
    cls = "single-valued token and claim"
    bearer = (("Authorization", f"Bearer {kit.token()}"), *JSON)
    beat = json.dumps({"id": REPORTED_JOB}).encode()
    signed = kit.signed(REPORT_SECRET, beat)
    claim = ("X-Consumer-Claim", REPORT_CLAIM)
    return [
        Probe(cls, "push: two tokens", "POST", "/push?token=a&token=b", JSON, push_body()),
        Probe(cls, "push: two empty tokens", "POST", "/push?token=&token=", JSON, push_body()),
        Probe(cls, "push: a valid ID token, two ?token=", "POST", "/push?token=x&token=x", bearer,
              push_body()),
        Probe(cls, "push: ?token= around another parameter", "POST", "/push?token=a&b=1&token=a",
              JSON, push_body()),
        Probe(cls, "tick: two ?token=", "POST", "/ticks/sweep?token=a&token=b",
              (*kit.signed("not-the-secret-0123456789", tick_body("sweep")),),
              tick_body("sweep")),
        Probe(cls, "report: the claim, then a stale one", "POST", REPORT,
              (claim, ("X-Consumer-Claim", "corpus-host/1/older"), *signed), beat),
        Probe(cls, "report: the claim twice", "POST", REPORT, (claim, claim, *signed), beat),
        Probe(cls, "report: two claims in one header", "POST", REPORT,
              (("X-Consumer-Claim", f"{REPORT_CLAIM}, corpus-host/1/older"), *signed), beat),
        Probe(cls, "report: an empty claim after the claim", "POST", REPORT,
              (claim, ("X-Consumer-Claim", ""), *signed), beat),
    ]  # fmt: skip


def underscores(kit: Kit) -> list[Probe]:
    """Credentials and clocks under names with underscores: none is read as its dashed twin,
    and none lets a request in. A junk signature under ``X_Consumer_Signature`` beside a
    well-formed timestamp is left out: wsgiref reads it as the signature and refuses it as not
    matching, where the others refuse it as missing (a 401 each, with another reason)."""
    cls = "header-name underscores"
    body = tick_body("sweep")
    forged = ("Authorization", f"Bearer {kit.key.hs256_with_public_key({'a': 1})}")
    junk_signature = ("X-Consumer-Signature", "v1=" + "ab" * 32)
    good = kit.signed("tick-secret-0123456789", body)
    under = tuple((name.replace("-", "_"), value) for name, value in good)
    beat = json.dumps({"id": REPORTED_JOB}).encode()
    hook = b'{"service":"a","release":"1"}'
    probes = [
        Probe(cls, f"push: a valid token as {name}", "POST", "/push",
              ((name, f"Bearer {kit.token()}"), *JSON), push_body())
        for name in ("Authorization_", "authorization_", "_Authorization", "Author_ization")
    ]  # fmt: skip
    probes += [
        Probe(cls, "tick: a forged token, the signature as X_Consumer_*", "POST", "/ticks/sweep",
              (forged, *under), body),
        Probe(cls, "tick: X_Consumer_Timestamp malformed, junk signature", "POST",
              "/ticks/sweep", (("X_Consumer_Timestamp", "soon"), junk_signature), body),
        Probe(cls, "tick: X_Consumer_Signature empty", "POST", "/ticks/sweep",
              (("X-Consumer-Timestamp", str(kit.now)), ("X_Consumer_Signature", "")), body),
        Probe(cls, "tick: X_CloudScheduler_ScheduleTime, junk signature", "POST",
              "/ticks/sweep", (("X_CloudScheduler_ScheduleTime", "2099-01-01T00:00:00Z"),
                               *JUNK_SIGNED), body),
        Probe(cls, "tick: a tick token as Authorization_", "POST", "/ticks/cleanup",
              (("Authorization_", f"Bearer {kit.tick_token()}"), kit.schedule()),
              tick_body("cleanup")),
        Probe(cls, "job API: the caller's token as Authorization_", "GET", "/jobs/a",
              (("Authorization_", f"Bearer {kit.token(aud=JOB_AUDIENCE, email=JOB_CALLER)}"),)),
        Probe(cls, "report: unsigned, the claim as X_Consumer_Claim", "POST", REPORT,
              (("X_Consumer_Claim", REPORT_CLAIM), *JSON), beat),
        Probe(cls, "hook: junk signature, X_Consumer_Timestamp malformed", "POST",
              "/hooks/deploy", (junk_signature, ("X_Consumer_Timestamp", "soon")), hook),
        Probe(cls, "hook: X_Consumer_Signature empty", "POST", "/hooks/deploy",
              (("X-Consumer-Timestamp", str(kit.now)), ("X_Consumer_Signature", "")), hook),
    ]  # fmt: skip
    return probes


def header_names(kit: Kit) -> list[Probe]:
    return single_valued(kit) + underscores(kit)
