"""OIDC push authentication through the real app, against certs served over real HTTP.

Every forgery in the issue gets 401 (403 for a genuine token from an account that may not push),
the refusal says nothing about why, and the reason is logged without the token.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from flask.testing import FlaskClient
from google.auth import exceptions
from google.auth import jwt as google_jwt

from consumer.auth.oidc import TokenRefused, unverified_header
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import AUDIENCE, CertsServer, SigningKey, claims, segment, unsigned

REFUSAL = {"outcome": "rejected", "key": "", "error": "missing or invalid token"}


def push(client: FlaskClient, authorization: str | None) -> Any:
    headers = {"Authorization": authorization} if authorization is not None else {}
    return client.post("/push", json=wrapped_body(data=b"hello"), headers=headers)


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_genuine_token_is_accepted(client: FlaskClient, google_key: SigningKey) -> None:
    response = push(client, bearer(google_key.sign(claims())))
    assert response.status_code == 200, response.json
    assert response.json["outcome"] == "unroutable"


@pytest.mark.parametrize("issuer", ["accounts.google.com", "https://accounts.google.com"])
def test_both_google_issuer_spellings_are_accepted(
    client: FlaskClient, google_key: SigningKey, issuer: str
) -> None:
    assert push(client, bearer(google_key.sign(claims(iss=issuer)))).status_code == 200


def test_every_allowed_account_may_push(client: FlaskClient, google_key: SigningKey) -> None:
    token = google_key.sign(claims(email="Second@project.iam.gserviceaccount.com"))
    assert push(client, bearer(token)).status_code == 200


NOW = int(time.time())
FORGED_CLAIMS: dict[str, dict[str, Any]] = {
    "wrong audience": claims(aud="https://other-service.example.com/push"),
    "audience is the request URL, not the configured one": claims(aud="http://localhost/push"),
    "audience as a list": claims(aud=[AUDIENCE, "https://other.example.com"]),
    "no audience": claims(aud=None),
    "email not verified": claims(email_verified=False),
    "email_verified as a string": claims(email_verified="true"),
    "no email_verified": claims(email_verified=None),
    "expired beyond the skew": claims(iat=NOW - 7200, exp=NOW - 600),
    "not yet valid beyond the skew": claims(iat=NOW + 600, exp=NOW + 4200),
    "wrong issuer": claims(iss="https://evil.example.com"),
    "issuer without the scheme variant": claims(iss="http://accounts.google.com"),
    "no issuer": claims(iss=None),
    "no exp": claims(exp=None),
    "no iat": claims(iat=None),
    "exp is not a number": claims(exp="tomorrow"),
    "no email": claims(email=None),
}


@pytest.mark.parametrize("case", FORGED_CLAIMS)
def test_correctly_signed_but_invalid_claims_get_401(
    client: FlaskClient, google_key: SigningKey, case: str
) -> None:
    response = push(client, bearer(google_key.sign(FORGED_CLAIMS[case])))
    assert (response.status_code, response.json) == (401, REFUSAL)


def test_a_valid_token_from_another_account_gets_403(
    client: FlaskClient, google_key: SigningKey
) -> None:
    token = google_key.sign(claims(email="someone-else@project.iam.gserviceaccount.com"))
    response = push(client, bearer(token))
    assert response.status_code == 403
    assert response.json == {
        "outcome": "rejected",
        "key": "",
        "error": "this caller may not push here",
    }


def test_the_clock_skew_tolerates_slightly_wrong_clocks(
    client: FlaskClient, google_key: SigningKey
) -> None:
    """Configured skew is 30 s: 10 s past exp and 10 s before iat still pass (times taken now,
    not at import: a long run would otherwise age them past the skew)."""
    now = int(time.time())
    expired_a_little = claims(iat=now - 3610, exp=now - 10)
    early_a_little = claims(iat=now + 10, exp=now + 3610)
    assert push(client, bearer(google_key.sign(expired_a_little))).status_code == 200
    assert push(client, bearer(google_key.sign(early_a_little))).status_code == 200


def test_forged_signatures_get_401(
    client: FlaskClient, google_key: SigningKey, other_key: SigningKey
) -> None:
    unknown_kid = other_key.sign(claims())
    known_kid_wrong_key = other_key.sign(claims(), kid=google_key.kid)
    genuine = google_key.sign(claims())
    head, _, signature = genuine.split(".")
    tampered = f"{head}.{segment(claims(email='root@evil.example.com'))}.{signature}"
    for token in (unknown_kid, known_kid_wrong_key, tampered):
        response = push(client, bearer(token))
        assert (response.status_code, response.json) == (401, REFUSAL), token


def test_alg_none_and_algorithm_confusion_get_401(
    client: FlaskClient, google_key: SigningKey
) -> None:
    forgeries = [
        unsigned(claims()),
        unsigned(claims(), kid=google_key.kid),
        google_key.hs256_with_public_key(claims()),
        google_key.sign(claims(), alg="ES256"),
        google_key.sign(claims(), alg="RS512"),
    ]
    for token in forgeries:
        response = push(client, bearer(token))
        assert (response.status_code, response.json) == (401, REFUSAL), token


def test_google_auth_itself_refuses_hs256_and_none(google_key: SigningKey) -> None:
    """Our RS256 pin is a second lock: the installed google-auth already refuses both."""
    certs = {google_key.kid: google_key.certificate_pem}
    for token in (google_key.hs256_with_public_key(claims()), unsigned(claims(), google_key.kid)):
        with pytest.raises(exceptions.InvalidValue, match="Unsupported signature algorithm"):
            google_jwt.decode(token, certs=certs, audience=AUDIENCE)


MALFORMED_HEADERS = {
    "missing": None,
    "empty": "",
    "scheme only": "Bearer",
    "basic auth": "Basic dXNlcjpwYXNz",
    "not a jwt": "Bearer not-a-jwt",
    "two segments": "Bearer abc.def",
    "four segments": "Bearer a.b.c.d",
    "illegal characters": "Bearer a+b.c/d.e=f",
    "header not base64 json": "Bearer !!!!.e30.sig",
    "header base64 but not json": f"Bearer {segment('x')[:-2]}zz.e30.c2ln",
    "header a json array": f"Bearer {segment([1, 2])}.e30.c2ln",
    "header without kid": f"Bearer {segment({'alg': 'RS256'})}.e30.c2ln",
    "kid is a number": f"Bearer {segment({'alg': 'RS256', 'kid': 7})}.e30.c2ln",
    "payload not json": f"Bearer {segment({'alg': 'RS256', 'kid': 'google-key-1'})}.bm9wZQ.c2ln",
    "signature not base64": f"Bearer {segment({'alg': 'RS256', 'kid': 'google-key-1'})}.e30.@@",
    "enormous token": "Bearer " + "a" * 20000 + ".b.c",
}


@pytest.mark.parametrize("case", MALFORMED_HEADERS)
def test_missing_or_malformed_authorization_gets_401(client: FlaskClient, case: str) -> None:
    response = push(client, MALFORMED_HEADERS[case])
    assert (response.status_code, response.json) == (401, REFUSAL)


def test_a_legacy_token_is_not_accepted_when_oidc_is_configured(
    client: FlaskClient,
) -> None:
    response = client.post("/push?token=anything", json=wrapped_body(data=b"x"))
    assert response.status_code == 401


def test_refusals_are_logged_with_a_reason_but_without_the_token(
    client: FlaskClient,
    google_key: SigningKey,
    other_key: SigningKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tokens = [
        other_key.sign(claims(), kid=google_key.kid),
        google_key.sign(claims(aud="https://other.example.com")),
        google_key.sign(claims(email="x@y.iam.gserviceaccount.com")),
    ]
    with caplog.at_level(logging.INFO, logger="consumer"):
        for token in tokens:
            push(client, bearer(token))
    logged = "\n".join(json.dumps(vars(record), default=str) for record in caplog.records)
    assert "Could not verify token signature" in logged
    assert "wrong audience" in logged
    assert "account not allowed" in logged
    for token in tokens:
        for part in token.split("."):
            assert part not in logged


def test_certificates_are_fetched_once_not_per_request(
    client: FlaskClient, google_key: SigningKey, certs_server: CertsServer
) -> None:
    for _ in range(20):
        assert push(client, bearer(google_key.sign(claims()))).status_code == 200
    assert certs_server.fetches == 1


def test_unknown_key_ids_cannot_make_us_hammer_the_certs_url(
    client: FlaskClient, google_key: SigningKey, certs_server: CertsServer
) -> None:
    push(client, bearer(google_key.sign(claims())))
    for number in range(20):
        token = google_key.sign(claims(), kid=f"made-up-{number}")
        assert push(client, bearer(token)).status_code == 401
    assert certs_server.fetches == 1


@pytest.mark.parametrize("alg", ["none", "HS256", "ES256", "RS512", None])
def test_the_header_check_pins_rs256_before_any_crypto(alg: str | None) -> None:
    """Our own lock, independent of which verifiers google-auth ships."""
    token = f"{segment({'alg': alg, 'kid': 'google-key-1'})}.e30.c2ln"
    with pytest.raises(TokenRefused, match="is not RS256"):
        unverified_header(token)
