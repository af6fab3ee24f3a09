"""One whole request through an ASGI application (the bridge), in process: the answer's status
and JSON body, with no server and no socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

Headers = tuple[tuple[bytes, bytes], ...]


def asgi_post(
    app: Callable[..., Any], path: str, query: str, body: bytes, headers: Headers = ()
) -> tuple[int, dict[str, Any]]:
    """``POST path?query`` with ``body`` (declared in Content-Length) and extra ``headers``."""
    scope = {
        "type": "http", "method": "POST", "path": path, "query_string": query.encode(),
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *headers],
        "http_version": "1.1", "scheme": "http", "root_path": "",
        "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 40000),
    }  # fmt: skip
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"]), json.loads(sent[1]["body"])
