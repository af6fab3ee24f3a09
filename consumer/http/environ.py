"""The WSGI environ (PEP 3333) of an ASGI HTTP scope whose body has been read whole.

A header whose name holds an underscore is dropped, as gunicorn's sync worker (its default
``header_map``) and Werkzeug's server drop it: ``X_Consumer_Signature`` would otherwise land on
the key of ``X-Consumer-Signature`` (``HTTP_X_CONSUMER_SIGNATURE``) behind the door's back."""

from __future__ import annotations

import io
import sys
from typing import Any

Scope = dict[str, Any]


def wsgi_environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """What gunicorn's sync worker would have built: same keys, headers as ``HTTP_*``."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode("utf-8").decode("latin-1"),
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        _add_header(environ, raw_name.decode("latin-1"), raw_value.decode("latin-1"))
    return environ


def _add_header(environ: dict[str, Any], name: str, value: str) -> None:
    if "_" in name:
        return
    key = name.upper().replace("-", "_")
    if key in ("CONTENT_LENGTH", "TRANSFER_ENCODING"):
        # The body is whole and de-chunked: its real length was set above. A chunked
        # Transfer-Encoding passed on would make Werkzeug ignore that length and read nothing.
        return
    if key != "CONTENT_TYPE":
        key = f"HTTP_{key}"
    if key in environ:
        # RFC 9110: repeated fields combine with commas (Cookie with "; ").
        separator = "; " if key == "HTTP_COOKIE" else ","
        environ[key] = f"{environ[key]}{separator}{value}"
    else:
        environ[key] = value
