"""A Google-like signing key and its certs server (as ``tests/auth``), and the tick secrets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.auth.tokens import CertsServer, SigningKey

SECRET = "tick-secret-0123456789"
OLD_SECRET = "old-tick-secret-0123456789"
TICK_AUDIENCE = "https://consumer.example.com/ticks"
SCHEDULER = "scheduler@project.iam.gserviceaccount.com"


@pytest.fixture(scope="session")
def google_key() -> SigningKey:
    return SigningKey("google-key-1")


@pytest.fixture
def certs_server(google_key: SigningKey) -> Iterator[CertsServer]:
    with CertsServer(google_key).running() as server:
        yield server
