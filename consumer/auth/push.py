"""Who may push: OIDC tokens from Pub/Sub, or the legacy shared token, or nobody checks (local).

``authenticator_for(settings)`` picks the check once at start-up; the view calls it per request.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import Protocol

from consumer.auth.oidc import OidcAuthenticator
from consumer.config.settings import Settings
from consumer.errors import Unauthorized

log = logging.getLogger("consumer.auth")


class Authenticator(Protocol):
    def __call__(self, headers: Mapping[str, str], query: Mapping[str, str]) -> None:
        """Return if the caller may push; raise ``Unauthorized`` or ``Forbidden`` otherwise."""


def allow_all(headers: Mapping[str, str], query: Mapping[str, str]) -> None:
    """Local mode: no check at all."""


class SharedTokenAuthenticator:
    """The legacy ``?token=`` verification token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def __call__(self, headers: Mapping[str, str], query: Mapping[str, str]) -> None:
        given = query.get("token", "").encode()
        if not hmac.compare_digest(given, self._token):
            raise Unauthorized("missing or invalid token")


def authenticator_for(settings: Settings) -> Authenticator:
    if settings.auth.push_audience and settings.auth.push_service_accounts:
        return OidcAuthenticator.from_settings(settings)
    if settings.auth.push_token:
        return SharedTokenAuthenticator(settings.auth.push_token)
    if settings.local_mode:
        # Logged at every worker start, and never hidden by a quieter CONSUMER_LOG_LEVEL.
        level = max(logging.WARNING, log.getEffectiveLevel())
        log.log(level, "LOCAL MODE: push requests are NOT authenticated; never expose this port")
        return allow_all
    raise Unauthorized("no push authentication configured")  # validate() prevents this
