"""What can be refused from the request line and headers alone, before the body is read.

The bridge (``consumer.http.bridge``) runs this on a worker thread before it reads a body, so an
unauthenticated caller cannot make the service read (or wait for) a large or slow body:

- ``POST /push``: the full push authentication (OIDC token or ``?token=``), as the view would
  run it; a refusal is the same JSON 401/403, and a push it authenticated is marked in the WSGI
  environ (``PUSH_AUTHENTICATED``), so the view does not verify the token a second time.
- ``POST /hooks/deploy``: the cheap checks (secrets configured, both signature headers present,
  a well-formed timestamp, a declared size within the hook's limit); the signature itself covers
  the body, so it is checked by the view once the body is in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from consumer.auth.push import Authenticator
from consumer.config.settings import Settings
from consumer.deploy.hook import HOOK_MAX_BYTES
from consumer.deploy.signature import SIGNATURE_HEADER, TIMESTAMP, TIMESTAMP_HEADER
from consumer.errors import BodyTooLarge, ConsumerError, Unauthorized, Unavailable
from consumer.http.environ import Scope

PUSH_AUTHENTICATED = "consumer.push_authenticated"
"""The WSGI environ key of a push the precheck authenticated. No client can set it: request
headers become ``HTTP_*`` keys."""


@dataclass(frozen=True)
class Checked:
    """What the precheck concluded from the request line and headers."""

    error: ConsumerError | None = None
    """Refuse the request with this, unread."""
    authenticated: bool = False
    """A push whose authentication passed here: the view need not run it again."""


Precheck = Callable[[Scope], Checked]


PASSED, AUTHENTICATED = Checked(), Checked(authenticated=True)


def precheck_for(settings: Settings, authenticate: Authenticator) -> Precheck:
    """``authenticate``: the app's own (``consumer.http.app.built_with``), so the precheck and the
    view share one certificate cache (one fetch) and the check is chosen once."""
    hook_enabled = bool(settings.deploy_hook.secrets)

    def check(scope: Scope) -> Checked:
        if scope.get("method") != "POST":
            return PASSED
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            if scope["path"] == "/push":
                query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
                authenticate(headers, query)
                return AUTHENTICATED
            if scope["path"] == "/hooks/deploy":
                _hook_headers(headers, hook_enabled)
        except Unavailable:
            return PASSED  # the view answers it (503) the same way, with its own log line
        except ConsumerError as error:
            return Checked(error)
        return PASSED

    return check


def _hook_headers(headers: Mapping[str, str], enabled: bool) -> None:
    if not enabled:
        raise Unauthorized("deploy hook is disabled: no secrets are configured")
    lowered = {key.lower(): value.strip() for key, value in headers.items()}
    if not lowered.get(SIGNATURE_HEADER.lower()):
        raise Unauthorized(f"missing {SIGNATURE_HEADER} header")
    if not TIMESTAMP.fullmatch(lowered.get(TIMESTAMP_HEADER.lower(), "")):
        raise Unauthorized("malformed timestamp: expected Unix seconds")
    declared = lowered.get("content-length", "0")
    if declared.isascii() and declared.isdigit() and int(declared) > HOOK_MAX_BYTES:
        raise BodyTooLarge(f"hook body is over {HOOK_MAX_BYTES} bytes")
