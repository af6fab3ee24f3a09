"""The hostile corpus's (``tests.http.corpus``) classes about credentials: forged tick slots, bad
tokens, one scheme's credential with the other's headers, and Pub/Sub's own token on a push
whose subscription may not start what it names (``wrong_source``, sent apart: it is
authenticated)."""

from __future__ import annotations

import json

from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import SigningKey, claims, unsigned
from tests.http.corpus_kit import (
    HOOK_SECRET,
    JSON,
    JUNK_SIGNED,
    TICK_SECRET,
    Kit,
    Probe,
    push_body,
    tick_body,
)


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
