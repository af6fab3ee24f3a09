"""A Google-like signing key, its certs served over real HTTP, and an app that trusts them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumer.config.settings import Settings
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey


@pytest.fixture(scope="session")
def google_key() -> SigningKey:
    return SigningKey("google-key-1")


@pytest.fixture(scope="session")
def other_key() -> SigningKey:
    """A key Google never published."""
    return SigningKey("attacker-key")


@pytest.fixture
def certs_server(google_key: SigningKey) -> Iterator[CertsServer]:
    with CertsServer(google_key).running() as server:
        yield server


@pytest.fixture
def oidc_settings(sqlite_url: str, certs_server: CertsServer) -> Settings:
    return Settings.of(
        database_url=sqlite_url,
        push_audience=AUDIENCE,
        push_service_accounts=(ACCOUNT, "second@project.iam.gserviceaccount.com"),
        oidc_certs_url=certs_server.url,
        oidc_clock_skew_seconds=30,
    )


@pytest.fixture
def app_settings(oidc_settings: Settings) -> Settings:
    """The auth tests' ``client`` trusts the certs server."""
    return oidc_settings
