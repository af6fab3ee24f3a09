"""A real SMTP server for the tests (aiosmtpd on loopback) that records what it receives,
and a self-signed certificate for its STARTTLS and implicit-TLS modes."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import re
import ssl
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bench.support.serving import free_port

MESSAGE_ID = re.compile(rb"^Message-ID: *(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass
class Recorder:
    """aiosmtpd handler: keeps every accepted message; ``reply`` refuses them instead."""

    delay: float = 0.0
    reply: str = ""
    rcpt_reply: str = ""
    """Refuse every recipient with this reply (greylisting, unknown mailbox...)."""
    port: int = 0
    raw: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    peers: set[Any] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(
        self, server: Any, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.rcpt_reply:
            return self.rcpt_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.reply:
            return self.reply
        content = envelope.content if isinstance(envelope.content, bytes) else b""
        found = MESSAGE_ID.search(content)
        with self.lock:  # parsing waits for the test: the server is a bottleneck under load
            self.raw.append(content)
            self.ids.append(found.group(1).decode() if found else "")
            self.peers.add(session.peer)
        return "250 OK"

    @property
    def messages(self) -> list[Message]:
        with self.lock:
            return [message_from_bytes(content) for content in self.raw]

    def message_ids(self) -> list[str]:
        with self.lock:
            return list(self.ids)


def authenticator(user: str, password: str) -> Any:
    def check(server: Any, session: Session, envelope: Envelope, mechanism: str, data: Any) -> Any:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
            user.encode(),
            password.encode(),
        )
        return AuthResult(success=ok, handled=False)  # unhandled: aiosmtpd replies 535

    return check


def start(recorder: Recorder, **kwargs: Any) -> Controller:
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port(), **kwargs)
    controller.start()
    recorder.port = controller.port
    return controller


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (PEM) and its key, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp.pem", directory / "smtp.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
