"""The worst bodies under the size limit keep a real worker under its memory ceiling.

``consumer serve --local`` with one worker; each body is sent over HTTP and the worker's peak
resident set (``VmHWM``, reset before each body through ``/proc/PID/clear_refs``) is read from
/proc. The ceiling is per worker, with its threads all busy on worst bodies at once, and chosen
so two workers fit the pod's 512 MiB limit with room to spare (docs/security.md).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from consumer.config.settings import DEFAULT_MAX_BODY_BYTES
from consumer.demo.processes import descendants
from tests.conftest import free_port, stop_process, wait_until
from tests.http.test_serve import clean_env

pytestmark = pytest.mark.slow
CEILING_MIB = 200
LIMIT = DEFAULT_MAX_BODY_BYTES - 4096  # room for the envelope around the payload


def envelope(data: bytes = b"", attributes: dict[str, str] | None = None, **extra: object) -> bytes:
    message: dict[str, object] = {"messageId": "MSGID", "publishTime": "2026-01-01T00:00:00Z"}
    if data:
        message["data"] = base64.b64encode(data).decode()
    if attributes:
        message["attributes"] = attributes
    document = {"message": message, "subscription": "projects/p/subscriptions/s", **extra}
    return json.dumps(document).encode()


def many_empty_objects() -> bytes:
    """4.9 million ``{}``: 807 MB in one worker before node counting."""
    count = (LIMIT - 200) // 3
    pad = b'"pad": [' + b"{}," * (count - 1) + b'{}], "message"'
    return envelope().replace(b'"message"', pad, 1)


def long_data() -> bytes:
    """One base64 string as long as the limit allows (decoded: about 10 MB)."""
    return envelope(b"x" * (LIMIT * 3 // 4 - 1000))


def nodes_in_data() -> bytes:
    """The decoded data of a tick is a JSON object of 3.5 million ``{}``."""
    inner = b'{"pad": [' + b"{}," * (LIMIT * 3 // 4 // 3 - 100) + b"{}]}"
    return envelope(inner, {"task": "cleanup"})


def many_attributes() -> bytes:
    """The most attributes allowed, with the rest of the limit spread over their values."""
    size = LIMIT // 256 - 40
    return envelope(attributes={f"a{n}": "v" * size for n in range(256)})


def deep_nesting() -> bytes:
    """Nested arrays as deep as the limit allows, repeated up to the value limit."""
    return envelope().replace(b'"message"', b'"pad": ' + b"[" * 63 + b"]" * 63 + b', "message"', 1)


def many_small_values_under_the_count() -> bytes:
    """Just under the value limit, each value a long string: the most objects allowed."""
    size = LIMIT // 199_000 - 3
    strings = b",".join(b'"' + b"s" * size + b'"' for _ in range(199_000))
    return envelope().replace(b'"message"', b'"pad": [' + strings + b'], "message"', 1)


BODIES: dict[str, Callable[[], bytes]] = {
    "4.9M {}": many_empty_objects,
    "long data": long_data,
    "3.5M {} in data": nodes_in_data,
    "256 long attributes": many_attributes,
    "deep nesting": deep_nesting,
    "199k long strings": many_small_values_under_the_count,
}


def status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


def post_all(url: str, body: bytes, copies: int) -> list[int]:
    """``copies`` requests at once, each a new message (a duplicate would only look one up)."""
    statuses: list[int] = []

    def one(copy: bytes) -> None:
        statuses.append(requests.post(url, data=copy, timeout=120).status_code)

    bodies = [body.replace(b"MSGID", uuid.uuid4().hex.encode(), 1) for _ in range(copies)]
    threads = [threading.Thread(target=one, args=(copy,)) for copy in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def test_worst_bodies_stay_under_the_ceiling(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "consumer", "serve", "--local", "--tick-seconds", "0",
         "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        env=clean_env(tmp_path, CONSUMER_LOG_LEVEL="WARNING"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    peaks: dict[str, float] = {}
    try:
        wait_until(lambda: requests.get(f"{base}/healthz", timeout=2).ok)
        (worker,) = descendants(process.pid)
        post_all(f"{base}/push", long_data(), 1)  # warm-up: imports, pools, caches
        for name, make in BODIES.items():
            body = make()
            assert len(body) <= DEFAULT_MAX_BODY_BYTES, name
            Path(f"/proc/{worker}/clear_refs").write_text("5")
            statuses = post_all(f"{base}/push", body, copies=4)  # every thread at once
            peaks[name] = status_mib(worker, "VmHWM")
            assert all(status < 500 for status in statuses), (name, statuses)
    finally:
        stop_process(process, timeout=90)
    print(json.dumps({name: round(mib, 1) for name, mib in peaks.items()}))
    assert max(peaks.values()) < CEILING_MIB, peaks
