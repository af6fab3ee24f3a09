"""Through ``consumer serve``'s gunicorn: a chunked hook body with junk signature headers, sent
slowly, no longer holds the server-wide large-body slot, so an authenticated 2 MiB push beside it
is answered at once (it used to wait until the hook's body was read to the push limit)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import pytest
import requests

from consumer.config.settings import Settings
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import Server, settings_env

pytestmark = pytest.mark.slow
TOKEN = "push-token-0123456789abcdef"
PIECE = b"x" * 16384


def dribble(port: int, seconds: float, answers: list[bytes]) -> None:
    """A chunked hook, 16 KiB every 0.05 s for ``seconds``; the answer goes to ``answers``."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST /hooks/deploy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     b"X-Consumer-Timestamp: 1700000000\r\nX-Consumer-Signature: v1=00\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
        until = time.monotonic() + seconds
        try:
            while time.monotonic() < until:
                sock.sendall(b"%x\r\n%s\r\n" % (len(PIECE), PIECE))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole body: what the test wants
        try:
            answers.append(sock.recv(65536))
        except (ConnectionResetError, TimeoutError):
            answers.append(b"")


def test_a_slow_unauthenticated_chunked_hook_does_not_hold_the_large_slot(
    sqlite_url: str, start_server: Callable[..., Server]
) -> None:
    env = settings_env(Settings(database_url=sqlite_url), CONSUMER_PUSH_TOKEN=TOKEN,
                       CONSUMER_DEPLOY_HOOK_SECRETS="hook-secret-0123456789")  # fmt: skip
    server = start_server(env, workers=2)
    answers: list[bytes] = []
    hook = threading.Thread(target=dribble, args=(server.port, 6.0, answers))
    hook.start()
    time.sleep(0.5)  # the hook's body is coming in
    body = json.dumps(wrapped_body(data=b"y" * (2 * 1024 * 1024), message_id="big-1")).encode()
    started = time.monotonic()
    response = requests.post(f"{server.url}/push?token={TOKEN}", data=body, timeout=30,
                             headers={"Content-Type": "application/json"})  # fmt: skip
    waited = time.monotonic() - started
    hook.join(30)
    assert response.status_code == 200, response.text
    assert waited < 3.0, f"the push waited {waited:.1f} s for the slot"
    assert answers and answers[0].startswith(b"HTTP/1.1 413"), answers
