"""The certs cache: one fetch per max-age, an early refetch (rate-limited) when Google rotates its
keys, the last good copy kept when the certs URL fails, 503 when there is no copy at all."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from flask.testing import FlaskClient

from consumer.auth.certs import CachedCerts, ttl_from
from consumer.auth.oidc import OidcAuthenticator
from consumer.config.settings import Settings
from consumer.errors import Forbidden, Unauthorized, Unavailable
from consumer.http.app import create_app
from consumer.service import Service
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey, claims
from tests.conftest import Clock

# The certificate cache's clock moves only when the test says so.
pytestmark = pytest.mark.clock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
def authenticate(certs_server: CertsServer, clock: Clock) -> Iterator[OidcAuthenticator]:
    certs = CachedCerts(certs_server.url, clock=clock.seconds, refetch_interval=60)
    yield OidcAuthenticator(AUDIENCE, [ACCOUNT], certs, clock_skew_seconds=30)


def bearer(key: SigningKey) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.sign(claims())}"}


def test_a_rotated_key_is_picked_up_after_the_refetch_interval(
    authenticate: OidcAuthenticator,
    certs_server: CertsServer,
    google_key: SigningKey,
    clock: Clock,
) -> None:
    authenticate(bearer(google_key), {})
    new_key = SigningKey("google-key-2")
    certs_server.publish(google_key, new_key)
    clock.advance(10)  # too soon to refetch for an unknown kid: refused, no fetch
    with pytest.raises(Unauthorized):
        authenticate(bearer(new_key), {})
    assert certs_server.fetches == 1
    clock.advance(60)
    authenticate(bearer(new_key), {})
    authenticate(bearer(google_key), {})
    assert certs_server.fetches == 2


def test_the_document_is_refetched_when_max_age_runs_out(
    authenticate: OidcAuthenticator,
    certs_server: CertsServer,
    google_key: SigningKey,
    clock: Clock,
) -> None:
    authenticate(bearer(google_key), {})
    clock.advance(3599)
    authenticate(bearer(google_key), {})
    assert certs_server.fetches == 1
    clock.advance(2)
    authenticate(bearer(google_key), {})
    assert certs_server.fetches == 2


def test_the_last_good_certificates_survive_a_failing_certs_url(
    authenticate: OidcAuthenticator,
    certs_server: CertsServer,
    google_key: SigningKey,
    clock: Clock,
) -> None:
    authenticate(bearer(google_key), {})
    certs_server.status = 500
    clock.advance(4000)
    authenticate(bearer(google_key), {})
    clock.advance(30)  # the failure is retried after the refetch interval, not per request
    authenticate(bearer(google_key), {})
    assert certs_server.fetches == 2


def test_a_wrong_account_is_forbidden_not_unauthorized(
    authenticate: OidcAuthenticator, google_key: SigningKey
) -> None:
    token = google_key.sign(claims(email="intruder@project.iam.gserviceaccount.com"))
    with pytest.raises(Forbidden):
        authenticate({"authorization": f"bearer {token}"}, {})


def test_no_certificates_at_all_is_a_503_so_pubsub_retries(
    sqlite_url: str, google_key: SigningKey, certs_server: CertsServer
) -> None:
    certs_server.status = 503
    client = create_app(Service.of(_settings(sqlite_url, certs_server.url))).test_client()
    response = client.post("/push", json={"message": {}}, headers=bearer(google_key))
    assert response.status_code == 503
    assert response.json["outcome"] == "unavailable"


def test_with_no_certificates_a_failing_certs_url_is_not_fetched_per_request(
    sqlite_url: str, google_key: SigningKey, certs_server: CertsServer
) -> None:
    certs_server.status = 500
    client = create_app(Service.of(_settings(sqlite_url, certs_server.url))).test_client()
    for _ in range(20):
        response = client.post("/push", json={"message": {}}, headers=bearer(google_key))
        assert response.status_code == 503
    assert certs_server.fetches == 1


def test_a_failed_first_fetch_is_retried_after_the_backoff(
    certs_server: CertsServer, google_key: SigningKey, clock: Clock
) -> None:
    certs = CachedCerts(certs_server.url, clock=clock.seconds, failure_backoff=10)
    authenticate = OidcAuthenticator(AUDIENCE, [ACCOUNT], certs)
    certs_server.status = 500
    for _ in range(3):
        with pytest.raises(Unavailable):
            authenticate(bearer(google_key), {})
    clock.advance(9)
    with pytest.raises(Unavailable):
        authenticate(bearer(google_key), {})
    assert certs_server.fetches == 1
    certs_server.status = 200
    clock.advance(1)
    authenticate(bearer(google_key), {})
    assert certs_server.fetches == 2


def test_an_unreachable_certs_url_is_a_503(sqlite_url: str, google_key: SigningKey) -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}/certs"
    client: FlaskClient = create_app(Service.of(_settings(sqlite_url, url))).test_client()
    response = client.post("/push", json={"message": {}}, headers=bearer(google_key))
    assert response.status_code == 503


@pytest.mark.parametrize(
    "document",
    [
        {"keys": [{"kid": "google-key-1", "kty": "RSA", "n": "AQAB", "e": "AQAB"}]},
        {},
        {"google-key-1": 42},
        ["not", "an", "object"],
    ],
)
def test_a_certs_document_of_the_wrong_shape_is_refused(
    certs_server: CertsServer, google_key: SigningKey, document: object
) -> None:
    """The JWK-set format would send google-auth down a path that ignores the clock skew."""
    certs_server.document = document  # type: ignore[assignment]
    certs = CachedCerts(certs_server.url)
    with pytest.raises(Unavailable):
        certs.ensure(google_key.kid)


@pytest.mark.parametrize(
    ("cache_control", "seconds"),
    [
        ("public, max-age=19876, must-revalidate, no-transform", 19876),
        ("max-age=1", 60),
        ("max-age=999999999", 86400),
        ("no-cache", 3600),
    ],
)
def test_the_cache_lifetime_follows_max_age_within_bounds(cache_control: str, seconds: int) -> None:
    assert ttl_from({"Cache-Control": cache_control}) == seconds


def _settings(database_url: str, certs_url: str) -> Settings:
    return Settings.of(
        database_url=database_url,
        push_audience=AUDIENCE,
        push_service_accounts=(ACCOUNT,),
        oidc_certs_url=certs_url,
    )
