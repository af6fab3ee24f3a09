"""What two ways in share: callers that show an OIDC ID token (their own audience and service
accounts) or sign with the deploy hook's HMAC scheme under secrets of their own. ``/ticks`` and
the job API each declare these four settings in their own section (each documented for its own
callers); their rules and what they mean are here, once."""

from __future__ import annotations

from typing import ClassVar

from consumer.config.fields import Rule


class SignedCallers:
    """Mixed into a section that declares ``audience``, ``service_accounts``, ``secrets`` and
    ``tolerance_seconds``. With neither OIDC nor secrets configured the way in is disabled."""

    prefix: ClassVar[str]
    audience: str
    service_accounts: tuple[str, ...]
    secrets: tuple[str, ...]
    tolerance_seconds: int

    @property
    def enabled(self) -> bool:
        return self.oidc or bool(self.secrets)

    @property
    def oidc(self) -> bool:
        return bool(self.audience and self.service_accounts)

    def checks(self) -> list[Rule]:
        name = f"CONSUMER_{self.prefix}"
        return [
            (
                bool(self.audience) == bool(self.service_accounts),
                f"{name}AUDIENCE and {name}SERVICE_ACCOUNTS must be set together",
            ),
            (
                all(len(secret) >= 16 for secret in self.secrets),
                f"{name}SECRETS: every secret must be at least 16 characters",
            ),
        ]
