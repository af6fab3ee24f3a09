"""Load generators for ``bench/push_bench.py``: ``wrk`` with a Lua script (each request a new
deploy event), or a Python fallback with one keep-alive connection per thread; both closed loops
(each connection sends its next request when the last is answered). ``steady_load`` is the open
loop ``bench/growth_bench.py`` holds a fixed rate with."""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

WRK_SCRIPT = r"""
local threads, counter, prefix = 0, 0, ""
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  prefix = args[1] .. "-" .. tid
end
function request()
  counter = counter + 1
  local id = prefix .. "-" .. counter
  local body = '{"message":{"attributes":{"event":"deploy","service":"bench","release":"' .. id
    .. '"},"messageId":"' .. id .. '","publishTime":"2026-01-01T00:00:00Z"},'
    .. '"subscription":"projects/bench/subscriptions/push"}'
  return wrk.format("POST", "/push", {["Content-Type"] = "application/json"}, body)
end
function done(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout
  io.write(string.format('RESULT {"requests": %d, "seconds": %f, "p50_us": %f, "p99_us": %f, '
    .. '"errors": %d}\n', summary.requests, summary.duration / 1e6, latency:percentile(50),
    latency:percentile(99), errors))
end
"""


@dataclass(frozen=True)
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int

    def __str__(self) -> str:
        return (
            f"{self.rps:8.0f} req/s  p50 {self.p50_ms:6.2f} ms  p99 {self.p99_ms:6.2f} ms  "
            f"non-2xx {self.errors}"
        )


def deploy_body(release: str) -> bytes:
    """A wrapped push of a new deploy (attributes only), keyed by ``release``."""
    message = {
        "attributes": {"event": "deploy", "service": "bench", "release": release},
        "messageId": release,
        "publishTime": "2026-01-01T00:00:00Z",
    }
    return json.dumps(
        {"message": message, "subscription": "projects/bench/subscriptions/push"}
    ).encode()


def wrk_load(url: str, connections: int, seconds: float, run_id: str) -> Result:
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "push.lua"
        script.write_text(WRK_SCRIPT)
        command = [
            "wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s",
            "-s", str(script), url, "--", run_id,
        ]  # fmt: skip
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULT "))
    figures = json.loads(line.removeprefix("RESULT "))
    return Result(
        rps=figures["requests"] / figures["seconds"],
        p50_ms=figures["p50_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        errors=int(figures["errors"]),
    )


def python_load(url: str, connections: int, seconds: float, run_id: str) -> Result:
    """``connections`` threads, each posting new deploys on one keep-alive connection."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    stop_at = time.monotonic() + seconds

    def drive(index: int) -> None:
        connection = http.client.HTTPConnection(host, parts.port, timeout=10)
        count = 0
        while (started := time.monotonic()) < stop_at:
            count += 1
            body = deploy_body(f"{run_id}-{index}-{count}")
            connection.request("POST", "/push", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            latencies[index].append(time.monotonic() - started)
            errors[index] += not 200 <= response.status < 300
        connection.close()

    threads = [threading.Thread(target=drive, args=(n,)) for n in range(connections)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    every = sorted(latency for per in latencies for latency in per)
    quantiles = statistics.quantiles(every, n=100)
    return Result(len(every) / elapsed, quantiles[49] * 1000, quantiles[98] * 1000, sum(errors))


@dataclass(frozen=True)
class Sample:
    scheduled: float
    """When the request was due, in seconds from the load's start."""
    latency: float
    """Seconds from when it was due to its answer: a stall counts against every request it
    delays, not only the one it caught (no coordinated omission)."""
    ok: bool


def steady_load(
    url: str,
    rate: float,
    seconds: float,
    run_id: str,
    connections: int = 32,
    stop: threading.Event | None = None,
) -> list[Sample]:
    """Open loop: request ``n`` is due at ``n / rate`` seconds, whatever the answers before it
    took; ``connections`` keep-alive connections take the due requests in turn (more than the
    server's workers, so a slow answer delays the next due request only when all are busy).
    Stops by itself after ``seconds``, or sooner once ``stop`` is set."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    samples: list[Sample] = []
    lock = threading.Lock()
    counter = iter(range(int(rate * seconds)))
    began = time.monotonic()

    def drive(index: int) -> None:
        connection = http.client.HTTPConnection(host, parts.port, timeout=10)
        while True:
            with lock:
                number = next(counter, None)
            if number is None or (stop is not None and stop.is_set()):
                break
            due = began + number / rate
            time.sleep(max(0.0, due - time.monotonic()))
            ok = _post(connection, deploy_body(f"{run_id}-{number}"))
            sample = Sample(due - began, time.monotonic() - due, ok)
            with lock:
                samples.append(sample)
        connection.close()

    threads = [threading.Thread(target=drive, args=(n,)) for n in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(samples, key=lambda sample: sample.scheduled)


def _post(connection: http.client.HTTPConnection, body: bytes) -> bool:
    """Whether the push was answered 2xx; a failed connection is closed (the next request opens
    it again) and counts as a failed push."""
    try:
        connection.request("POST", "/push", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        connection.close()
        return False
    return 200 <= response.status < 300
