"""A real SMTP server on loopback (aiosmtpd) that counts what each recipient received: the
demo's only witness of duplicates and losses."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope

from consumer.demo.processes import free_port


class MailCounter:
    """aiosmtpd handler: one count per recipient per accepted message."""

    def __init__(self) -> None:
        self.by_recipient: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        with self._lock:
            self.by_recipient.update(address.lower() for address in envelope.rcpt_tos)
        return "250 OK"

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.by_recipient)

    def delivered(self) -> int:
        with self._lock:
            return sum(self.by_recipient.values())


class MailSink:
    """Start with ``with MailSink() as sink:``; ``sink.port`` is where pods send."""

    def __init__(self) -> None:
        self.counter = MailCounter()
        self.port = free_port()
        self._controller = Controller(self.counter, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> MailSink:
        self._controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._controller.stop()
