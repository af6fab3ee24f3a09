"""A sweeping process for the flow-control hammer tests: ``--threads`` threads, each running the
registered ``sweep`` task (``consumer sweep --once``'s path: the dispatcher, the tick handler,
the real ``Sweeper`` and claim) again and again, until no job is left unfinished or
``--seconds`` have passed. The service is composed from the environment (``CONSUMER_*``)."""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
import threading
import time
from typing import Any

from sqlalchemy import func, select

from consumer.cli.jobs import run_sweep_once
from consumer.db.engine import make_engine
from consumer.jobs.schema import jobs
from consumer.service import Service, compose

UNFINISHED = select(func.count()).where(jobs.c.status.in_(["pending", "running"]))
IDLE_PAUSE = 0.05


def unfinished(service: Service) -> int:
    with service.engine.connect() as connection:
        return int(connection.execute(UNFINISHED).scalar_one())


def sweep_until_done(service: Service, until: float, budget: float, out: list[Any]) -> None:
    try:
        sweep_while_due(service, until, budget, out)
    except BaseException as exc:  # the process reports it and fails
        out.append({"error": repr(exc)})


def sweep_while_due(service: Service, until: float, budget: float, out: list[Any]) -> None:
    while time.monotonic() + budget < until:
        summary = run_sweep_once(service, budget)
        out.append(summary)
        if not summary["claimed"]:
            if not summary["still_due"] and not unfinished(service):
                return
            time.sleep(IDLE_PAUSE)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--budget", type=float, default=12)
    options = parser.parse_args()
    engine = make_engine(os.environ["CONSUMER_DATABASE_URL"], pool_size=options.threads * 2)
    service = compose(os.environ, engine=engine)
    faulthandler.dump_traceback_later(options.seconds + 10, exit=True, file=sys.stderr)
    until = time.monotonic() + options.seconds
    summaries: list[Any] = []
    threads = [
        threading.Thread(target=sweep_until_done, args=(service, until, options.budget, summaries))
        for _ in range(options.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [s["error"] for s in summaries if "error" in s]
    if errors:
        raise SystemExit(f"{len(errors)} sweeping threads failed: {errors[0]}")
    totals = {key: sum(s[key] for s in summaries) for key in ("claimed", "done", "lost")}
    throttled = sum(sum(s["throttled"].values()) > 0 for s in summaries)
    print(json.dumps({**totals, "sweeps": len(summaries), "throttled_sweeps": throttled}))


if __name__ == "__main__":
    main()
