"""The hostile corpus's (``tests.http.corpus``) classes about how a request is framed: its
method, its path, and chunked or oversized bodies, each without valid credentials."""

from __future__ import annotations

from tests.auth.tokens import claims
from tests.http.corpus_kit import (
    JSON,
    JUNK_SIGNED,
    SCHEDULER,
    TICK_AUDIENCE,
    Kit,
    Probe,
    push_body,
    tick_body,
)


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
