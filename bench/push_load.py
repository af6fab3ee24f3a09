"""Load generators for ``bench/push_bench.py``: ``wrk`` with a Lua script (each request a new
deploy event), or a Python fallback with one keep-alive connection per thread."""

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
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    stop_at = time.monotonic() + seconds

    def drive(index: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
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
