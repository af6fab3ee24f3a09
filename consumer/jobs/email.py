"""Built-in job kind ``email``: one message per job, by SMTP or, with no SMTP host configured (the
embedded default), into a local maildir.

The Message-ID is derived from the job, so if a sweeper dies between sending and recording the
job, the re-sent copy carries the same Message-ID and a downstream system can drop it.
"""

from __future__ import annotations

import mailbox
import smtplib
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from typing import Any

from consumer.config.settings import Settings
from consumer.errors import Permanent, Retryable
from consumer.jobs.kinds import JobContext
from consumer.jobs.model import Job
from consumer.wire.headers import checked_headers

DEFAULT_PORTS = {"ssl": 465, "starttls": 587, "none": 25}
ADDRESS_FIELDS = ("to", "cc", "bcc")
RESERVED_HEADERS = frozenset({
    "from", "sender", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id",
    "return-path", "x-consumer-job", "content-type", "content-transfer-encoding", "mime-version",
})  # fmt: skip
"""Headers the message's own fields set: an extra ``headers`` entry may not add or repeat one
(a ``Bcc`` there would add a hidden recipient, a ``Sender`` would change who sent it)."""


def message_id(job: Job, sender: str) -> str:
    """Stable for the job: the same on every attempt, never shared by two jobs."""
    domain = parseaddr(sender)[1].rpartition("@")[2] or "localhost"
    return f"<job-{job.id}.{job.created_at:%Y%m%d%H%M%S}@{domain}>"


def send(context: JobContext, job: Job) -> None:
    """The ``email`` job kind. Payload: ``to`` (address or list), ``subject``, ``text``, and
    optionally ``html``: what a producer may set (``consumer.jobs.fields.EMAIL_FIELDS``). The
    sender and the other recipients, ``from``, ``cc``, ``bcc``, ``reply_to`` and ``headers``, come
    from the storage rule (its ``set`` option), the settings (``CONSUMER_MAIL_FROM``) or trusted
    code (``consumer.enqueue``): producers' copies of them are dropped before they are stored."""
    message = build_message(job, context.settings)
    if not context.settings.smtp.host:
        mailbox.Maildir(context.settings.smtp.maildir_path, create=True).add(message)
        return
    smtp = context.resource("smtp", lambda: smtp_session(context.settings, context.remaining()))
    try:
        smtp.send_message(message)
    except smtplib.SMTPRecipientsRefused as exc:
        # 4xx (greylisting, mailbox busy) and 421 (which also drops the session) are transient.
        context.discard("smtp")
        codes = [code for code, _ in exc.recipients.values()]
        refused = f"every recipient was refused: {sorted(exc.recipients.items())}"
        if all(500 <= code < 600 for code in codes):
            raise Permanent(refused) from exc
        raise Retryable(refused) from exc
    except smtplib.SMTPResponseException as exc:
        context.discard("smtp")
        if 500 <= exc.smtp_code < 600:
            raise Permanent(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}") from exc
        raise Retryable(f"SMTP {exc.smtp_code}: {exc.smtp_error!r}") from exc
    except (smtplib.SMTPException, OSError):
        context.discard("smtp")
        raise


def build_message(job: Job, settings: Settings) -> EmailMessage:
    """The message for a job; a malformed payload is permanent (a retry cannot fix it)."""
    payload = job.payload
    if not isinstance(payload, Mapping):
        raise Permanent("email payload must be a JSON object")
    try:
        return _build(job, payload, settings)
    except (KeyError, TypeError, ValueError) as exc:
        raise Permanent(f"invalid email payload: {exc}") from exc


def _build(job: Job, payload: Mapping[str, Any], settings: Settings) -> EmailMessage:
    message = EmailMessage()
    sender = str(payload.get("from") or settings.smtp.mail_from)
    message["From"] = sender
    for name in ADDRESS_FIELDS:
        if payload.get(name):
            message[name.title()] = ", ".join(_addresses(payload[name]))
    if "To" not in message:
        raise ValueError("'to' is required")
    if payload.get("reply_to"):
        message["Reply-To"] = str(payload["reply_to"])
    message["Subject"] = str(payload.get("subject", ""))
    message["Date"] = formatdate(job.created_at.timestamp(), usegmt=True)
    message["Message-ID"] = message_id(job, sender)
    message["X-Consumer-Job"] = str(job.id)
    for name, value in checked_headers(payload.get("headers")):
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"header {name!r} is set by the message's own fields, not 'headers'")
        message[name] = value
    message.set_content(str(payload.get("text", "")))
    if payload.get("html"):
        message.add_alternative(str(payload["html"]), subtype="html")
    return message


def _addresses(value: Any) -> list[str]:
    if not isinstance(value, str | list):
        raise ValueError(f"expected an address or a list of addresses, got {value!r}")
    items = [value] if isinstance(value, str) else value
    for item in items:
        if not isinstance(item, str) or "@" not in parseaddr(item)[1]:
            raise ValueError(f"not an email address: {item!r}")
    return items


@contextmanager
def smtp_session(settings: Settings, remaining: float) -> Iterator[smtplib.SMTP]:
    """One authenticated SMTP connection, shared by the jobs of a batch."""
    port = settings.smtp.port or DEFAULT_PORTS[settings.smtp.security]
    timeout = max(1.0, min(float(settings.smtp.timeout_seconds), remaining))
    smtp: smtplib.SMTP
    if settings.smtp.security == "ssl":
        context = ssl.create_default_context()
        smtp = smtplib.SMTP_SSL(settings.smtp.host, port, timeout=timeout, context=context)
    else:
        smtp = smtplib.SMTP(settings.smtp.host, port, timeout=timeout)
    try:
        if settings.smtp.security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp.username:
            smtp.login(settings.smtp.username, settings.smtp.password)
        yield smtp
    finally:
        _close(smtp)


def _close(smtp: smtplib.SMTP) -> None:
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()
