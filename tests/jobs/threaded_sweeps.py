"""A sweeper process with several sweeping threads, as a pod whose handler threads each run a
tick's sweep: ``python -m tests.jobs.threaded_sweeps THREADS`` (settings from ``CONSUMER_*``).
Each thread sweeps until nothing is due; the process is meant to be killed mid-batch."""

from __future__ import annotations

import os
import sys
import threading
import time

from consumer.jobs.sweep import Sweeper
from consumer.service import compose


def main(threads: int) -> None:
    service = compose(os.environ, serves_push=False)
    kinds, engine = service.registry.job_kinds, service.engine

    def sweep() -> None:
        Sweeper(service.settings, engine, kinds).run(time.monotonic() + 120)

    workers = [threading.Thread(target=sweep) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main(int(sys.argv[1]))
