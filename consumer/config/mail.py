"""The ``email`` job kind's settings (``consumer.jobs.email``): the SMTP server, the sender, and
the maildir it delivers to locally when no server is set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, setting
from consumer.config.parse import whole

NO_SMTP_HOST = (
    "CONSUMER_SMTP_HOST is required outside local mode: without it the email job kind would "
    "write messages to the pod's own filesystem (CONSUMER_MAILDIR_PATH) and mark them done"
)


@dataclass(frozen=True, repr=False)
class SmtpSettings(Section):
    """``CONSUMER_SMTP_*``, ``CONSUMER_MAIL_FROM`` and ``CONSUMER_MAILDIR_PATH``."""

    prefix: ClassVar[str] = "SMTP_"
    host: str = setting("")
    """SMTP server of the ``email`` job kind; required outside local mode (empty, in local mode:
    deliver to ``maildir_path`` instead)."""
    port: int = setting(0, convert=whole, within=(0, 65535))
    """0: 465 with ``ssl``, 587 with ``starttls``, 25 with ``none``."""
    security: str = setting("starttls")
    """``starttls``, ``ssl`` or ``none`` (plain SMTP, for a relay on a trusted network)."""
    username: str = setting("")
    password: str = setting("", secret=True)
    timeout_seconds: int = setting(30, convert=whole, within=(1, 600))
    mail_from: str = setting("consumer@localhost", env="MAIL_FROM")
    """Default sender of the ``email`` job kind; its domain also names the Message-IDs."""
    maildir_path: str = setting("maildir", env="MAILDIR_PATH")
    """Where the ``email`` kind delivers when no ``smtp_host`` is set (the embedded default)."""

    def checks(self) -> list[Rule]:
        return [
            (
                self.security in ("starttls", "ssl", "none"),
                "CONSUMER_SMTP_SECURITY must be starttls, ssl or none",
            )
        ]
