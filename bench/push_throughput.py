"""Push throughput over 16 loopback connections, before (gunicorn sync workers) and after (the
asyncio worker with the buffering bridge), same settings: 2 workers, local mode, one database.

Each push is a new message (a unique messageId on an unrouted subscription), so every request
claims and records an inbox row. The floor is ``GET /healthz`` (no database) on the same server,
same concurrency, in the same run. Both servers run at once and their rounds alternate, so the
load of a shared machine falls on both alike. Medians over ``--repeat`` rounds.

    python -m bench.push_throughput [--requests 400] [--repeat 5] [--database DSN]

Bounded: a fixed number of requests per round and a fixed number of rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import threading
import time
from collections.abc import Callable

import requests

from bench.servers import KINDS, database, server
from consumer.wire.envelopes_out import wrapped_body

CONNECTIONS = 16


def rate(total: int, one: Callable[[requests.Session], None]) -> float:
    """Requests per second for ``total`` requests spread over 16 threads with their own session."""
    per_thread = total // CONNECTIONS
    failures: list[BaseException] = []

    def worker() -> None:
        with requests.Session() as session:
            try:
                for _ in range(per_thread):
                    one(session)
            except BaseException as exc:  # reported below: a failed request voids the round
                failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"a request failed: {failures[0]!r}")
    return per_thread * CONNECTIONS / (time.monotonic() - started)


def push(base: str) -> Callable[[requests.Session], None]:
    def one(session: requests.Session) -> None:
        body = json.dumps(wrapped_body(attributes={"kind": "bench"})).encode()
        response = session.post(f"{base}/push", data=body, timeout=60)
        if response.status_code != 200:
            raise RuntimeError(f"push answered {response.status_code}: {response.text[:200]}")

    return one


def healthz(base: str) -> Callable[[requests.Session], None]:
    def one(session: requests.Session) -> None:
        session.get(f"{base}/healthz", timeout=60).raise_for_status()

    return one


def measure(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Both servers up at once, their rounds interleaved, so a change in the machine's load
    (it is shared) falls on both alike. Medians of (push, floor) per kind."""
    rounds: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in KINDS}
    with contextlib.ExitStack() as stack:
        bases = {}
        for kind in KINDS:
            url = stack.enter_context(database(args.database))
            bases[kind], _port = stack.enter_context(server(kind, url))
            rate(CONNECTIONS * 4, push(bases[kind]))  # warm-up: connections, pools, imports
        for _ in range(args.repeat):
            for kind in KINDS:
                rounds[kind][0].append(rate(args.requests, push(bases[kind])))
                rounds[kind][1].append(rate(args.requests, healthz(bases[kind])))
    return {k: (statistics.median(p), statistics.median(f)) for k, (p, f) in rounds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--database", default=None, help="PostgreSQL admin DSN (default SQLite)")
    args = parser.parse_args()
    for kind, (pushes, floor) in measure(args).items():
        print(
            f"{kind:8} push {pushes:7.1f}/s  floor GET /healthz {floor:7.1f}/s  "
            f"ratio {pushes / floor:.3f}  ({CONNECTIONS} connections, medians of {args.repeat})"
        )


if __name__ == "__main__":
    main()
