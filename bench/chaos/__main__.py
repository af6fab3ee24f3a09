"""The chaos harness (not a test): three consumer pods behind a balancer, fed by Google's Pub/Sub
emulator (ticks, jobs, storage notifications from fake-gcs-server) and signed deploy hooks, with
jobs sending email to a real SMTP sink and calling a real Node.js target, on a PostgreSQL cluster
of its own reached through a TCP proxy. For the given time it SIGKILLs pods, pauses them
(SIGSTOP, then SIGCONT 10-30 s later), restarts, cuts and pauses the database and makes the sinks
stall or fail, and records every worker death the pods' logs tell of; then it drains (bounded)
and accounts for every tick, event, job, email and call (docs/faults.md, "The chaos harness").

    python -m bench.chaos --seconds 600 [--drain-seconds 90] [--seed N] [--workdir DIR]

The last line is ``chaos: N faults, lost N, duplicates N (N attributed), recovery p50 N s max
N s``; the exit status is 1 on any loss or unattributed duplicate. Everything binds 127.0.0.1
and every process the run started is stopped by its process group (or, for PostgreSQL, by
``pg_ctl``) when it ends, fails or is interrupted.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
from pathlib import Path

from bench.chaos.load import Rates
from bench.chaos.run import Options, run


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=600, help="load and faults (default 600)")
    parser.add_argument(
        "--drain-seconds", type=float, default=90, help="longest wait for the backlog (default 90)"
    )
    parser.add_argument("--seed", type=int, default=None, help="fault plan (default: random)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    parser.add_argument("--csv-rows", type=int, default=3, help="email rows uploaded per second")
    parser.add_argument("--mail-jobs", type=int, default=1, help="email jobs published per second")
    parser.add_argument("--call-jobs", type=int, default=1, help="call jobs published per second")
    args = parser.parse_args(argv)
    if args.seconds < 30:
        parser.error("--seconds must be at least 30 (room for one fault of each kind)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds: every process stopped
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    rates = Rates(csv_rows=args.csv_rows, mail_jobs=args.mail_jobs, call_jobs=args.call_jobs)
    return run(Options(args.seconds, args.drain_seconds, seed, rates, args.workdir))


if __name__ == "__main__":
    sys.exit(main())
