"""IAP assertions verified as Google documents them, against keys served over real HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from consumer.dashboard.iap import AssertionRefused, IapVerifier, parse_jwk_set
from consumer.errors import Unavailable
from tests.conftest import free_port
from tests.dashboard.iap_keys import AUDIENCE, IapKey, KeyServer, key_server


@pytest.fixture
def keys() -> Iterator[tuple[IapKey, KeyServer]]:
    key = IapKey("key-1")
    with key_server([key, IapKey("key-2")]) as server:
        yield key, server


def _verifier(server: KeyServer) -> IapVerifier:
    return IapVerifier(AUDIENCE, server.url, clock_skew_seconds=30)


def test_a_valid_assertion_names_the_user(keys: tuple[IapKey, KeyServer]) -> None:
    key, server = keys
    verifier = _verifier(server)
    assert verifier.email_of(key.sign()) == "operator@example.com"
    assert verifier.email_of(key.sign(email="other@example.com")) == "other@example.com"
    assert server.fetches == 1  # cached, never fetched per request


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "/projects/1/global/backendServices/2"},
        {"aud": None},
        {"iss": "https://accounts.google.com"},
        {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200},
        {"iat": int(time.time()) + 3600},
        {"email": None},
    ],
    ids=["other-audience", "no-audience", "other-issuer", "expired", "future", "no-email"],
)
def test_wrong_claims_are_refused(keys: tuple[IapKey, KeyServer], claims: dict) -> None:  # type: ignore[type-arg]
    key, server = keys
    with pytest.raises(AssertionRefused):
        _verifier(server).email_of(key.sign(**claims))


def test_a_forged_signature_is_refused(keys: tuple[IapKey, KeyServer]) -> None:
    _, server = keys
    impostor = IapKey("key-1")  # the right kid, another private key
    with pytest.raises(AssertionRefused):
        _verifier(server).email_of(impostor.sign())


def test_an_unknown_key_is_refused_without_hammering_the_key_server(
    keys: tuple[IapKey, KeyServer],
) -> None:
    key, server = keys
    verifier = _verifier(server)
    verifier.email_of(key.sign())
    for _ in range(5):
        with pytest.raises(AssertionRefused):
            verifier.email_of(IapKey("rotated-away").sign())
    assert server.fetches == 1  # an unknown kid refetches at most once a minute


@pytest.mark.parametrize("assertion", ["", "not-a-jwt", "a.b.c", "eyJhbGciOiJub25lIn0.e30."])
def test_malformed_assertions_are_refused(keys: tuple[IapKey, KeyServer], assertion: str) -> None:
    with pytest.raises(AssertionRefused):
        _verifier(keys[1]).email_of(assertion)


def test_no_keys_at_all_is_unavailable_not_a_refusal() -> None:
    verifier = IapVerifier(AUDIENCE, f"http://127.0.0.1:{free_port()}/keys")
    with pytest.raises(Unavailable):
        verifier.email_of(IapKey("key-1").sign())


def test_the_jwk_set_must_hold_ec_keys() -> None:
    with pytest.raises(ValueError):
        parse_jwk_set({"keys": [{"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"}]})
    with pytest.raises(ValueError):
        parse_jwk_set({"kid": "PEM"})
    assert set(parse_jwk_set({"keys": [IapKey("a").jwk(), {"kid": 3}]})) == {"a"}
