"""Benchmark the claim's turns on PostgreSQL (not a test): a job of group B enqueued behind a
backlog of group A, worked off by sweeper threads running the real ``Sweeper`` with a job that
holds ``--hold`` seconds. For each backlog size it prints when B's job started after the first
start, and when the backlog drained, with groups (A's jobs in group ``a``, B's in ``b``) and
without (every job ungrouped: B waits behind all of A, as before groups).

    python -m bench.group_bench [--backlog 2000,20000] [--threads 8] [--hold 0.001]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from bench.pgdb import database
from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds


def run_once(conninfo: str, backlog: int, grouped: bool, threads: int, hold: float) -> Any:

    url = conninfo.replace("postgresql://", "postgresql+psycopg://")
    engine = make_engine(url, pool_size=threads + 2)
    with engine.begin() as connection:
        connection.exec_driver_sql("TRUNCATE jobs")
        backlog_jobs = [NewJob("work", {"g": "a"}, group="a" if grouped else None)
                        for _ in range(backlog)]  # fmt: skip
        enqueue_many(connection, backlog_jobs, allow_unknown=True)
        enqueue_many(connection, [NewJob("work", {"g": "b"}, group="b" if grouped else None)],
                     allow_unknown=True)  # fmt: skip
    starts: dict[str, list[float]] = {"a": [], "b": []}
    lock = threading.Lock()

    def work(_context: Any, job: Any) -> None:
        with lock:
            starts[job.payload["g"]].append(time.monotonic())
        time.sleep(hold)

    kinds = JobKinds()
    kinds.add("work", work)
    settings = Settings.of(database_url=url, local_mode=True, sweep_batch_size=50)
    until = time.monotonic() + 300

    def sweep() -> None:
        while len(starts["a"]) < backlog and time.monotonic() < until:
            Sweeper(settings, engine, kinds).run(min(until, time.monotonic() + 10))

    workers = [threading.Thread(target=sweep) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    engine.dispose()
    first = min(starts["a"] + starts["b"])
    return starts["b"][0] - first, max(starts["a"]) - first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", default="2000,20000")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--hold", type=float, default=0.001)
    args = parser.parse_args()
    print(f"{args.threads} sweeper threads, each job holds {args.hold * 1000:g} ms")
    print(f"\n{'backlog of A':>13}{'groups':>8}{'B started after s':>19}{'A drained after s':>19}")
    with database("group_bench") as conninfo:
        upgrade(conninfo.replace("postgresql://", "postgresql+psycopg://"))
        for backlog in (int(size) for size in args.backlog.split(",")):
            for grouped in (False, True):
                waited, drained = run_once(conninfo, backlog, grouped, args.threads, args.hold)
                shown = "yes" if grouped else "no"
                print(f"{backlog:>13}{shown:>8}{waited:>19.2f}{drained:>19.2f}")


if __name__ == "__main__":
    main()
