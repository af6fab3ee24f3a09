"""The service's signature on the messages it publishes itself (continuations, wake-ups), so that
a ``run_now`` or a continuation is honoured only when the service sent it (docs/sources.md).

The signature is an attribute, ``consumer_signature=v1=<hex HMAC-SHA256>``, over the message's
data and every other attribute: a publisher without the secret can neither make one nor move one
onto other attributes or another payload. Pub/Sub delivers attributes and data unchanged in a
wrapped push and in a pull, so the receiver recomputes the same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence

from consumer.wire.message import PushMessage

ATTRIBUTE = "consumer_signature"
VERSION = "v1="
_CONTEXT = b"consumer-message-v1\n"
"""Kept apart from every other HMAC the service checks (the deploy hook's, the ticks')."""


def signature(data: bytes, attributes: Mapping[str, str], secret: str) -> str:
    """The signature attribute's value for ``data`` and ``attributes`` (the signature itself, if
    present, is left out)."""
    digest = hmac.new(secret.encode(), _signed_bytes(data, attributes), hashlib.sha256)
    return VERSION + digest.hexdigest()


def sign(data: bytes, attributes: Mapping[str, str], secret: str) -> dict[str, str]:
    """``attributes`` with the signature added (unchanged without a secret)."""
    unsigned = {key: value for key, value in attributes.items() if key != ATTRIBUTE}
    if not secret:
        return unsigned
    return {**unsigned, ATTRIBUTE: signature(data, unsigned, secret)}


def is_signed(message: PushMessage, secrets: Sequence[str]) -> bool:
    """Whether one of ``secrets`` signed ``message``; every secret is compared, in constant
    time, so the answer's timing tells nothing."""
    given = message.attributes.get(ATTRIBUTE, "")
    if not given.startswith(VERSION):
        return False
    found = False
    for secret in secrets:
        found |= hmac.compare_digest(given, signature(message.data, message.attributes, secret))
    return found


def _signed_bytes(data: bytes, attributes: Mapping[str, str]) -> bytes:
    """Unambiguous: the attributes as one line of sorted JSON, then the data as is."""
    pairs = sorted((key, value) for key, value in attributes.items() if key != ATTRIBUTE)
    encoded = json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))
    return _CONTEXT + encoded.encode("utf-8", "surrogatepass") + b"\n" + data
