"""The HMAC scheme (``consumer.auth.signature``), pure: what is signed, and every way a request
can be unsigned or mis-signed is refused. The deploy hook, ``/ticks``, the job API and HTTP
targets all sign with it; their own tests check only how they use it."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from consumer.auth.signature import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Verifier,
    request_message,
    sign,
    signed_headers,
)
from consumer.errors import Unauthorized

SECRET = "test-secret-0123456789abcdef"
OLD_SECRET = "old-secret-0123456789abcdef"

NOW = 1_767_225_600
BODY = b'{"service": "web", "release": "v1"}'
verifier = Verifier((SECRET, OLD_SECRET), tolerance_seconds=300)


def test_a_signed_request_passes() -> None:
    verifier.verify(signed_headers(SECRET, NOW, BODY), BODY, now=NOW)


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    # Computed independently: printf '1767225600.{...}' | openssl dgst -sha256 -hmac SECRET
    expected = hmac.new(SECRET.encode(), b"1767225600." + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, NOW, BODY) == expected


def test_the_previous_secret_still_passes_during_a_rotation() -> None:
    verifier.verify(signed_headers(OLD_SECRET, NOW, BODY), BODY, now=NOW)


def test_several_signatures_in_one_header_pass_if_one_matches() -> None:
    headers = signed_headers(SECRET, NOW, BODY)
    headers[SIGNATURE_HEADER] = f"v1={'0' * 64}, {headers[SIGNATURE_HEADER]}"
    verifier.verify(headers, BODY, now=NOW)


def test_header_names_are_case_insensitive() -> None:
    headers = {k.lower(): v for k, v in signed_headers(SECRET, NOW, BODY).items()}
    verifier.verify(headers, BODY, now=NOW)


def refused(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> str:
    with pytest.raises(Unauthorized) as caught:
        verifier.verify(headers, body, now=now)
    return caught.value.message


def test_an_unknown_secret_is_refused() -> None:
    assert refused(signed_headers("not-a-known-secret-at-all", NOW, BODY)) == (
        "signature does not match"
    )


def test_a_changed_body_is_refused() -> None:
    assert "does not match" in refused(signed_headers(SECRET, NOW, BODY), body=BODY + b" ")


def test_a_changed_timestamp_is_refused() -> None:
    headers = signed_headers(SECRET, NOW, BODY)
    headers[TIMESTAMP_HEADER] = str(NOW + 1)
    assert "does not match" in refused(headers)


@pytest.mark.parametrize("skew", [-301, 301, -86400, 10**9])
def test_stale_and_future_timestamps_are_refused(skew: int) -> None:
    message = refused(signed_headers(SECRET, NOW + skew, BODY))
    assert "tolerance" in message


@pytest.mark.parametrize("skew", [-300, 300])
def test_the_tolerance_is_inclusive(skew: int) -> None:
    verifier.verify(signed_headers(SECRET, NOW + skew, BODY), BODY, now=NOW)


@pytest.mark.parametrize("missing", [TIMESTAMP_HEADER, SIGNATURE_HEADER])
def test_a_missing_header_is_refused(missing: str) -> None:
    headers = signed_headers(SECRET, NOW, BODY)
    del headers[missing]
    assert refused(headers) == f"missing {missing} header"


@pytest.mark.parametrize(
    ("header", "value", "fragment"),
    [
        (TIMESTAMP_HEADER, "-5", "malformed timestamp"),
        (TIMESTAMP_HEADER, "1.5e9", "malformed timestamp"),
        (TIMESTAMP_HEADER, "9" * 40, "malformed timestamp"),
        (TIMESTAMP_HEADER, "\u00b2", "malformed timestamp"),  # isdigit() but not int()
        (TIMESTAMP_HEADER, "\u0661\u0667\u0666\u0667", "malformed timestamp"),  # Arabic-Indic
        (SIGNATURE_HEADER, "deadbeef", "malformed signature"),
        (SIGNATURE_HEADER, "v2=abc", "malformed signature"),
        (SIGNATURE_HEADER, ",".join(["v1=00"] * 9), "malformed signature"),
        (SIGNATURE_HEADER, "v1=ü", "does not match"),
    ],
)
def test_malformed_headers_are_refused(header: str, value: str, fragment: str) -> None:
    headers = signed_headers(SECRET, NOW, BODY)
    headers[header] = value
    assert fragment in refused(headers)


def test_no_configured_secret_refuses_everything() -> None:
    with pytest.raises(Unauthorized, match="disabled"):
        Verifier((), 300).verify(signed_headers(SECRET, NOW, BODY), BODY, now=NOW)


def test_a_request_signs_its_method_and_path_before_its_body() -> None:
    assert request_message("delete", "/jobs/order-42", b"") == b"DELETE /jobs/order-42\n"
    signed = request_message("POST", "/jobs/order-42/retry", BODY)
    headers = signed_headers(SECRET, NOW, signed)
    verifier.verify(headers, signed, now=NOW)
    other_key = request_message("POST", "/jobs/order-43/retry", BODY)
    assert "does not match" in refused(headers, body=other_key)
    other_operation = request_message("DELETE", "/jobs/order-42/retry", BODY)
    assert "does not match" in refused(headers, body=other_operation)
