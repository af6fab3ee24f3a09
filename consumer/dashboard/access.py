"""Who may use the dashboard, and proof that a form was posted from the dashboard itself.

Outside local mode the dashboard refuses to start without an admin token or an IAP audience: its
actions change production state. A request is let in by the admin token (a bearer header, or the
cookie the login form sets; compared in constant time) or by a verified IAP assertion. Every POST
carries a CSRF token equal to its cookie (double submit): another site can make a browser post a
form here, but cannot read or set this site's cookies, so it cannot know the value.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from consumer.config.settings import Settings
from consumer.dashboard.iap import HEADER, AssertionRefused, IapVerifier
from consumer.errors import SettingsError

TOKEN_COOKIE = "consumer_dashboard_token"
CSRF_COOKIE = "consumer_dashboard_csrf"
CSRF_FIELD = "csrf"


def same(given: str, expected: str) -> bool:
    """Constant-time equality of two secrets (an empty one never matches)."""
    return bool(given and expected) and hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Access:
    token: str
    iap: IapVerifier | None
    local: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        """Refuses to build (``SettingsError``) when nothing would guard the actions."""
        iap = None
        if settings.dashboard.iap_audience:
            iap = IapVerifier(
                settings.dashboard.iap_audience,
                settings.dashboard.iap_keys_url,
                settings.auth.oidc_clock_skew_seconds,
            )
        if not (settings.local_mode or settings.dashboard.token or iap):
            raise SettingsError(
                "the dashboard needs authentication outside local mode: set "
                "CONSUMER_DASHBOARD_TOKEN or CONSUMER_DASHBOARD_IAP_AUDIENCE"
            )
        return cls(settings.dashboard.token, iap, settings.local_mode)

    def who(self, headers: Any, cookies: Mapping[str, str]) -> str | None:
        """The caller's name for the action log, or ``None`` if not let in. ``headers``: a
        case-insensitive mapping (werkzeug's ``Headers``)."""
        scheme, _, bearer = headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and same(bearer.strip(), self.token):
            return "admin-token"
        if same(cookies.get(TOKEN_COOKIE, ""), self.token):
            return "admin-token"
        assertion = headers.get(HEADER, "")
        if self.iap is not None and assertion:
            try:
                return f"iap:{self.iap.email_of(assertion)}"
            except AssertionRefused:
                return None
        return "local" if self.local else None

    def token_matches(self, given: str) -> bool:
        return same(given, self.token)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(form: Mapping[str, str], cookies: Mapping[str, str]) -> bool:
    return same(form.get(CSRF_FIELD, ""), cookies.get(CSRF_COOKIE, ""))
