"""Benchmark the pending-job sweep on PostgreSQL with no-op jobs (not a test).

For 1, 2 and 4 concurrent sweeper processes it measures jobs/s and the p50/p95 latency of one
claim statement, for:
  consumer   the real sweep (consumer.jobs.sweep.Sweeper: SQLAlchemy Core, leases, summaries);
  direct     the same claim and complete statements issued through psycopg, without SQLAlchemy
             (the payload column read as psycopg decodes it by default, row by row);
  procrastinate  a peer Postgres job queue (one job per fetch), its own database.
Every mode works off the same number of jobs; medians of ``--repeat`` runs are reported with
the ratios consumer/direct (target >= 0.80) and consumer/procrastinate (target >= 20). The
last line sets the sweep's worker CPU per job beside direct SQL's (``sweep cpu: ...``).

With ``--cap N`` it measures instead what a concurrency cap costs: the real sweep without a cap
(``consumer``) against the same sweep with a cap of N on the kind (``capped``, every claim under
the kind's ``job_flow`` lock), N large enough that no job waits for it; target capped/consumer
>= 0.90.

With ``--groups N`` it adds the real sweep of the same jobs spread over N groups
(``grouped``: the claim takes the groups in turn, no group limit) and prints the CPU line of
both; target grouped/consumer worker CPU per job <= 1.10.

    python -m bench.sweep_bench [--jobs 20000] [--batch 100] [--repeat 3] [--profile]
    python -m bench.sweep_bench --cap 100000 [--sweepers 1,4]
    python -m bench.sweep_bench --groups 1000 --skip-procrastinate [--sweepers 1,4]
    python -m bench.sweep_bench --groups 1000 --group-cap 1000 --skip-procrastinate
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.pgdb import database
from bench.support.aged_epochs import AGE_LINE, age
from bench.sweep_workers import (
    consumer_worker,
    direct_worker,
    fill_jobs,
    fill_procrastinate,
    procrastinate_worker,
    profile_consumer,
    setup_procrastinate,
    sqlalchemy_url,
)
from consumer.db.migrate import upgrade


def run_once(
    worker: Callable[..., None], conninfo: str, sweepers: int, batch: int
) -> dict[str, Any]:
    context = mp.get_context("spawn")
    barrier, results = context.Barrier(sweepers + 1), context.Queue()
    processes = [
        context.Process(target=worker, args=(conninfo, batch, barrier, results))
        for _ in range(sweepers)
    ]
    for process in processes:
        process.start()
    barrier.wait()
    started = time.monotonic()
    outcomes = [results.get(timeout=900) for _ in processes]
    for process in processes:
        process.join()
    elapsed = max(outcome[0] for outcome in outcomes) - started
    latencies = sorted(value for outcome in outcomes for value in outcome[1])
    return {"seconds": elapsed, "latencies": latencies, "cpu": sum(o[3] for o in outcomes)}


def percentile(values: list[float], fraction: float) -> float:
    return values[min(len(values) - 1, int(fraction * len(values)))] if values else float("nan")


WORKERS: dict[str, tuple[Callable[..., None], Callable[[str, int], None]]] = {
    "consumer": (consumer_worker, fill_jobs),
    "direct": (direct_worker, fill_jobs),
    "procrastinate": (procrastinate_worker, fill_procrastinate),
}


def measure_once(mode: str, conninfo: str, sweepers: int, jobs: int, batch: int) -> Sample:
    worker, fill = WORKERS[mode]
    fill(conninfo, jobs)
    run = run_once(worker, conninfo, sweepers, batch)
    check_all_done(mode, conninfo, jobs)
    latencies, cpu = run["latencies"], run["cpu"] / jobs
    return Sample(
        jobs / run["seconds"], percentile(latencies, 0.5), percentile(latencies, 0.95), cpu
    )


@dataclass
class Sample:
    rate: float
    p50: float
    p95: float
    cpu: float
    """Worker-process CPU seconds per job (the database server's CPU is not included)."""


@dataclass
class Series:
    """One mode at one concurrency: every repeat, reported as medians."""

    samples: list[Sample] = field(default_factory=list)

    def median(self, name: str) -> float:
        return statistics.median(getattr(sample, name) for sample in self.samples)


def paired_ratio(ours: Series, other: Series) -> float:
    """Median of per-repeat ratios: runs of both modes alternate, so load drift cancels out."""
    pairs = zip(ours.samples, other.samples, strict=True)
    return statistics.median(a.rate / b.rate for a, b in pairs)


def check_all_done(mode: str, conninfo: str, jobs: int) -> None:
    table, done = (
        ("procrastinate_jobs", "succeeded") if mode == "procrastinate" else ("jobs", "done")
    )
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(
            f"SELECT count(*) FROM {table} WHERE status = %s", [done]
        ).fetchone()
    if row is None or row[0] != jobs:
        raise SystemExit(f"{mode}: {row and row[0]} of {jobs} jobs done; the run is invalid")


def report_cap(results: dict[tuple[str, int], Series], levels: list[int], cap: int) -> None:
    print(f"\n{'mode':<10}{'sweepers':>9}{'jobs/s':>11}{'claim p50 ms':>14}{'claim p95 ms':>14}")
    for (mode, sweepers), series in results.items():
        p50, p95 = series.median("p50") * 1000, series.median("p95") * 1000
        print(f"{mode:<10}{sweepers:>9}{series.median('rate'):>11.0f}{p50:>14.2f}{p95:>14.2f}")
    print(f"\n{'sweepers':>9}{'capped/consumer':>17}")
    for sweepers in levels:
        ratio = paired_ratio(results[("capped", sweepers)], results[("consumer", sweepers)])
        print(f"{sweepers:>9}{ratio:>17.2f}")
    print(f"cap {cap} (no job waits for it); target: capped/consumer >= 0.90")


def report(results: dict[tuple[str, int], Series], levels: list[int]) -> None:
    header = f"{'mode':<14}{'sweepers':>9}{'jobs/s':>11}{'claim p50 ms':>14}{'claim p95 ms':>14}"
    print(f"\n{header}{'worker CPU us/job':>19}")
    for (mode, sweepers), series in results.items():
        p50, p95 = series.median("p50") * 1000, series.median("p95") * 1000
        shown = [f"{value:.2f}" if value == value else "-" for value in (p50, p95)]
        cpu = series.median("cpu") * 1e6
        print(
            f"{mode:<14}{sweepers:>9}{series.median('rate'):>11.0f}{shown[0]:>14}{shown[1]:>14}"
            f"{cpu:>19.1f}"
        )
    print(f"\n{'sweepers':>9}{'consumer/direct':>17}{'consumer/procrastinate':>24}")
    for sweepers in levels:
        ours = results[("consumer", sweepers)]
        direct = paired_ratio(ours, results[("direct", sweepers)])
        peer = results.get(("procrastinate", sweepers))
        versus_peer = f"{ours.median('rate') / peer.median('rate'):.1f}x" if peer else "-"
        print(f"{sweepers:>9}{direct:>17.2f}{versus_peer:>24}")
    print("targets: consumer/direct >= 0.80, consumer/procrastinate >= 20x")


def cpu_line(results: dict[tuple[str, int], Series], mode: str = "consumer") -> str:
    """The bench's last line: worker CPU per job of the sweep beside direct SQL's, same run,
    medians of repeats (steadier than rates on a shared machine); ``n/a`` where either mode did
    not run at that concurrency."""
    one, four = (cpu_pair(results, sweepers, mode) for sweepers in (1, 4))
    label = "sweep cpu" if mode == "consumer" else f"sweep cpu ({mode})"
    return f"{label}: 1 sweeper {one[0]} us/job vs direct {one[1]} us: {one[2]} x; " + (
        f"4 sweepers {four[0]} vs {four[1]}: {four[2]} x"
    )


def cpu_pair(
    results: dict[tuple[str, int], Series], sweepers: int, mode: str = "consumer"
) -> tuple[str, str, str]:
    """Consumer and direct worker CPU per job in microseconds, and their ratio, as printed."""
    ours, direct = results.get((mode, sweepers)), results.get(("direct", sweepers))
    if ours is None or direct is None:
        return "n/a", "n/a", "n/a"
    mine, theirs = ours.median("cpu") * 1e6, direct.median("cpu") * 1e6
    return f"{mine:.1f}", f"{theirs:.1f}", f"{mine / theirs:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sweepers", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--procrastinate-repeat", type=int, default=1)
    parser.add_argument("--skip-procrastinate", action="store_true")
    parser.add_argument("--profile", action="store_true", help="also cProfile one sweeper")
    parser.add_argument("--cap", type=int, default=None, help="compare a capped kind's sweep")
    parser.add_argument("--groups", type=int, default=0, help="also sweep jobs in N groups")
    parser.add_argument("--group-cap", type=int, default=None, help="and with this group cap")
    args = parser.parse_args()
    modes: tuple[str, ...] = ("consumer", "direct")
    if args.groups:
        WORKERS["grouped"] = (consumer_worker, functools.partial(fill_jobs, groups=args.groups))
        modes = ("consumer", "grouped", "direct")
    if args.groups and args.group_cap is not None:
        capped = functools.partial(consumer_worker, group_cap=args.group_cap)
        WORKERS["group-capped"] = (capped, functools.partial(fill_jobs, groups=args.groups))
        modes = ("consumer", "grouped", "group-capped", "direct")
    if args.cap is not None:
        WORKERS["capped"] = (functools.partial(consumer_worker, cap=args.cap), fill_jobs)
        modes, args.skip_procrastinate = ("consumer", "capped"), True
    levels = [int(level) for level in args.sweepers.split(",")]
    cpus = os.cpu_count()
    print(f"{args.jobs} no-op jobs, batch {args.batch}, median of {args.repeat} runs, {cpus} CPUs")
    print(AGE_LINE)
    results: dict[tuple[str, int], Series] = {}
    with database("sweep_bench") as conninfo:
        upgrade(sqlalchemy_url(conninfo))
        age(sqlalchemy_url(conninfo))
        for sweepers in levels:
            for _ in range(args.repeat):
                for mode in modes:
                    sample = measure_once(mode, conninfo, sweepers, args.jobs, args.batch)
                    results.setdefault((mode, sweepers), Series()).samples.append(sample)
        if args.profile:
            profile_consumer(conninfo, args.jobs, args.batch)
    if not args.skip_procrastinate:
        with database("sweep_bench_procrastinate") as conninfo:
            setup_procrastinate(conninfo)
            for sweepers in levels:
                for _ in range(args.procrastinate_repeat):
                    sample = measure_once("procrastinate", conninfo, sweepers, args.jobs, 1)
                    results.setdefault(("procrastinate", sweepers), Series()).samples.append(sample)
    if args.cap is not None:
        report_cap(results, levels, args.cap)
    else:
        report(results, levels)
    if args.groups:
        print(grouped_line(results, levels, args.groups))
        if args.group_cap is not None:
            print(grouped_line(results, levels, args.groups, "group-capped"))
        print(cpu_line(results, "grouped"))
    print(cpu_line(results))


def grouped_line(
    results: dict[tuple[str, int], Series], levels: list[int], groups: int, mode: str = "grouped"
) -> str:
    """Worker CPU per job of the grouped sweep over the ungrouped one, per concurrency."""
    ratios = []
    for sweepers in levels:
        grouped, plain = results[(mode, sweepers)], results[("consumer", sweepers)]
        pairs = zip(grouped.samples, plain.samples, strict=True)
        ratio = statistics.median(a.cpu / b.cpu for a, b in pairs)
        ratios.append(f"{sweepers} sweepers {ratio:.2f} x")
    return (
        f"{groups} groups, worker CPU per job {mode}/consumer: "
        + ", ".join(ratios)
        + (" (target <= 1.10)")
    )


if __name__ == "__main__":
    main()
