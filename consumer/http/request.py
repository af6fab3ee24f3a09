"""One view of a request, made once at the edge from an ASGI scope or a WSGI environ.

Every check reads this view, so no two layers can read a request differently (one taking the last
``Authorization`` header, another the comma-joined pair):

- the method upper-cased (``post`` is ``POST``: Werkzeug routes it so, so the checks must too);
- leading slashes of the path collapsed to one (``//push`` is ``/push``), as Python's
  ``http.server`` (wsgiref, Werkzeug's server) does before the app sees it and gunicorn does not;
- header names lower-cased, a repeated header joined with ``,`` (RFC 9110), as every WSGI server
  does already, so the view is the same however the request was served;
- the headers authentication reads are single-valued: a comma in one (a second copy, or junk no
  token, timestamp, schedule time or claim contains) is named by ``ambiguous`` and refused with
  400. ``X-Consumer-Signature`` is a list by design (``v1=a,v1=b`` during a rotation): each entry
  is checked against the body, so a second copy adds only candidates that must verify;
- so is the legacy ``?token=`` of a push: sent twice, one layer could read the first and another
  the last, so ``ambiguous`` names it too;
- a header whose name holds an underscore is not read (``x_consumer_signature`` is not
  ``x-consumer-signature``): gunicorn's default and Werkzeug's server drop such a header, and a
  proxy that vets the dashed name lets the other through (wsgiref maps both names to one key
  before the app sees it; the door cannot tell them apart there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

SINGLE_VALUED = (
    "authorization",
    "x-consumer-timestamp",
    "x-cloudscheduler-scheduletime",
    "x-cloudscheduler-jobname",
    "x-goog-iap-jwt-assertion",
    "x-consumer-claim",
)
"""Headers authentication reads whose value never holds a comma (a JWT, Unix seconds, an RFC 3339
time, a job's resource name, the claim a job target reports under: ``host/pid/hex``)."""
SINGLE_VALUED_QUERY = ("token",)
"""Query parameters authentication reads: the legacy shared push token."""


@dataclass(frozen=True)
class RequestView:
    method: str
    path: str
    """As the server decoded it (``%2F`` is ``/``); never normalised further."""
    query: str
    headers: Mapping[str, str]

    @classmethod
    def of_scope(cls, scope: Mapping[str, Any]) -> RequestView:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1").strip()
            if "_" in name:  # as gunicorn's sync worker and Werkzeug's server: not read
                continue
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        query = scope.get("query_string", b"").decode("latin-1")
        return cls(scope["method"].upper(), _path(scope["path"]), query, headers)

    @classmethod
    def of_environ(cls, environ: Mapping[str, Any]) -> RequestView:
        headers = {
            key[5:].replace("_", "-").lower(): str(value).strip()
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                headers[key.replace("_", "-").lower()] = environ[key]
        method = str(environ.get("REQUEST_METHOD", "")).upper()
        path = _path(_unicode(environ.get("PATH_INFO", "")))
        return cls(method, path, environ.get("QUERY_STRING", ""), headers)

    def header(self, name: str) -> str:
        """The value of ``name`` (lower-case), stripped; "" when absent."""
        return self.headers.get(name, "")

    def ambiguous(self) -> str | None:
        """What names the first single-valued authentication header that was sent twice (or
        holds a comma), or query parameter sent twice; None when every one is single."""
        header = next((name for name in SINGLE_VALUED if "," in self.headers.get(name, "")), None)
        if header is not None:
            return f"{header} header"
        names = [name for name, _ in parse_qsl(self.query, keep_blank_values=True)]
        repeated = (name for name in SINGLE_VALUED_QUERY if names.count(name) > 1)
        return next((f"?{name}= query parameter" for name in repeated), None)

    def chunked(self) -> bool:
        return "chunked" in self.header("transfer-encoding").lower()

    def query_values(self) -> dict[str, str]:
        """The query's parameters, the first value of each (as Flask's ``request.args.get``)."""
        values: dict[str, str] = {}
        for name, value in parse_qsl(self.query, keep_blank_values=True):
            values.setdefault(name, value)
        return values


def _unicode(path: str) -> str:
    """A WSGI path (UTF-8 bytes decoded as latin-1, PEP 3333) as the text an ASGI scope holds, so
    a path parameter (a job's key) reads the same however the request was served."""
    try:
        return path.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return path


def _path(path: str) -> str:
    return "/" + path.lstrip("/") if path.startswith("//") else path
