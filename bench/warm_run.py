"""Warm-run figures of the built-in HTTP warmer: 200 targets against a local server that answers
each request after a fixed delay, at concurrency 16, against a concurrency-1 baseline measured in
the same run. Prints medians over the repetitions and the speed-up ratio. The server runs in its
own process, so its threads do not share the warmer's interpreter lock.

    python -m bench.warm_run [--targets 200] [--concurrency 16] [--delay-ms 20] [--repeat 5]

Bounded: a fixed number of runs, each over a fixed target list; the server stops at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event

import requests

from bench.support.deploy_targets import TargetServer
from consumer.deploy.http_fetch import HttpPolicy
from consumer.deploy.http_warmer import warm_all
from consumer.deploy.report import WarmReport
from consumer.outbound.budget import Budget


def one_run(base: str, urls: list[str], concurrency: int) -> WarmReport:
    before = _hits(base)
    policy = HttpPolicy(timeout_seconds=10, retries=0, concurrency=concurrency)
    started = time.monotonic()
    results, not_reached = warm_all(urls, policy, Budget(lambda: 600.0))
    report = WarmReport("http", tuple(results), tuple(not_reached), time.monotonic() - started)
    after = _hits(base)
    paths = [url.removeprefix(base) for url in urls]
    if report.ok != len(urls) or any(after[p] - before.get(p, 0) != 1 for p in paths):
        raise SystemExit("a target was not hit exactly once: the figures would be meaningless")
    return report


def _hits(base: str) -> dict[str, int]:
    return dict(requests.get(f"{base}/_hits", timeout=10).json())


def _serve(delay: float, ports: Queue[int], stop: Event) -> None:
    server = TargetServer(delay=delay).start()
    ports.put(server.server_address[1])
    stop.wait(600)
    server.stop()


def medians(reports: Sequence[WarmReport]) -> dict[str, float]:
    def median_of(values: list[float | None]) -> float:
        return statistics.median(v for v in values if v is not None)

    return {
        "duration_ms": statistics.median(r.duration_seconds * 1000 for r in reports),
        "p50_ms": median_of([r.latency_ms(0.50) for r in reports]),
        "p95_ms": median_of([r.latency_ms(0.95) for r in reports]),
    }


def measure(args: argparse.Namespace) -> dict[int, dict[str, float]]:
    """Medians per concurrency (1, the baseline, and the one asked for), same server, same run."""
    ports: Queue[int] = multiprocessing.Queue()
    stop = multiprocessing.Event()
    process = multiprocessing.Process(target=_serve, args=(args.delay_ms / 1000, ports, stop))
    process.start()
    try:
        base = f"http://127.0.0.1:{ports.get(timeout=30)}"
        urls = [f"{base}/ok/{n}" for n in range(args.targets)]
        return {
            concurrency: medians([one_run(base, urls, concurrency) for _ in range(args.repeat)])
            for concurrency in (1, args.concurrency)
        }
    finally:
        stop.set()
        process.join(30)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.warm_run", description=__doc__)
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rows = measure(args)
    print(f"{args.targets} targets, server delay {args.delay_ms:g} ms, medians of {args.repeat}")
    for concurrency, row in rows.items():
        figures = "  ".join(f"{name} {value:8.1f}" for name, value in row.items())
        print(f"concurrency {concurrency:>3}: {figures}")
    ratio = rows[1]["duration_ms"] / rows[args.concurrency]["duration_ms"]
    print(f"speed-up of concurrency {args.concurrency} over 1: {ratio:.1f}x")


if __name__ == "__main__":
    main()
