"""The operator dashboard's listener and authentication (``consumer.dashboard.access``); format
checks only, since only ``consumer dashboard`` needs one of its credentials configured."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, named, setting
from consumer.config.rules import url_problem

IAP_AUDIENCE = re.compile(r"/projects/\d+/global/backendServices/\d+")


@dataclass(frozen=True, repr=False)
class DashboardSettings(Section):
    """``CONSUMER_DASHBOARD_*``."""

    prefix: ClassVar[str] = "DASHBOARD_"
    bind: str = setting("127.0.0.1:8081")
    """``host:port`` of ``consumer dashboard`` (its own listener, never the push port)."""
    token: str = setting("", secret=True)
    """Admin token of the dashboard (login form or ``Authorization: Bearer``); at least 16
    characters. Outside local mode the dashboard needs this or the IAP audience."""
    iap_audience: str = setting("")
    """Accept Identity-Aware Proxy users: the ``/projects/NUMBER/global/backendServices/ID``
    audience of the signed ``x-goog-iap-jwt-assertion`` header."""
    iap_keys_url: str = setting("https://www.gstatic.com/iap/verify/public_key-jwk")
    """Where IAP's ES256 public keys (a JWK set) are fetched (and cached)."""

    def checks(self) -> list[Rule]:
        audience = self.iap_audience
        keys_url = self.iap_keys_url
        return [
            (
                not self.token or len(self.token) >= 16,
                "CONSUMER_DASHBOARD_TOKEN must be at least 16 characters",
            ),
            (
                not audience or IAP_AUDIENCE.fullmatch(audience) is not None,
                "CONSUMER_DASHBOARD_IAP_AUDIENCE must be "
                "/projects/NUMBER/global/backendServices/ID",
            ),
            # the same URL rule as the OIDC certificates: a prefix check would let
            # http://127.0.0.1:1@evil.example through
            named("CONSUMER_DASHBOARD_IAP_KEYS_URL", url_problem(keys_url, loopback_http=True)),
        ]
