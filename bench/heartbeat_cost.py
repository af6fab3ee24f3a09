"""What idle heartbeating costs PostgreSQL (not a test).

Short leases make a killed pod's work come back within seconds, but a live holder pays for them
with renewals. This holds ``--sweeps`` claimed batches of ``--batch`` jobs (each renewed by the
sweep's own ``LeaseKeeper``, every third of ``CONSUMER_JOB_LEASE_SECONDS``) and ``--claims``
inbox claims in flight (renewed by the process's ``Heartbeats``, every second) while nothing else
runs, and reports per second: transactions committed and rows updated in the bench's own
database, CPU of the backends serving it, and WAL written (cluster-wide, so other activity on the
server is included; a window with no heartbeats is measured first as the floor).

    python -m bench.heartbeat_cost [--sweeps 8] [--batch 100] [--claims 8] [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from bench.pgdb import database
from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.inbox.store import Claim, Inbox
from consumer.jobs.lease import LeaseKeeper
from consumer.jobs.store import JobStore
from consumer.pipeline.heartbeat import Heartbeats
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow

TICKS = os.sysconf("SC_CLK_TCK")
FIGURES = ("transactions/s", "rows updated/s", "backend CPU ms/s", "WAL KiB/s (cluster)")


@dataclass(frozen=True)
class Sample:
    at: float
    commits: int
    updated: int
    cpu: float
    wal: int


def sample(conninfo: str) -> Sample:
    """The bench database's counters, its backends' CPU seconds, and the cluster's WAL position."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        commits, updated, wal = connection.execute(
            "SELECT xact_commit, tup_updated, pg_current_wal_lsn() - '0/0'::pg_lsn"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone() or (0, 0, 0)
        pids = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    cpu = cpu_of(pid for (pid,) in pids)
    return Sample(time.monotonic(), int(commits), int(updated), cpu, int(wal))


def cpu_of(pids: Iterator[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a backend that ended (or a server not on this machine)
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def rates(before: Sample, after: Sample) -> dict[str, float]:
    seconds = after.at - before.at
    values = (
        (after.commits - before.commits) / seconds,
        (after.updated - before.updated) / seconds,
        1000 * (after.cpu - before.cpu) / seconds,
        (after.wal - before.wal) / 1024 / seconds,
    )
    return dict(zip(FIGURES, values, strict=True))


def measure(conninfo: str, seconds: float) -> dict[str, float]:
    first = sample(conninfo)
    time.sleep(seconds)
    return rates(first, sample(conninfo))


@contextmanager
def held_batches(url: str, sweeps: int, batch: int) -> Iterator[None]:
    """``sweeps`` claimed batches, each kept by its own lease heartbeat, as live sweeps keep
    theirs while their jobs run."""
    settings = Settings.of(database_url=url, local_mode=True)
    engine = make_engine(url)
    with engine.begin() as connection:
        enqueue_many(connection, [NewJob("email", {}) for _ in range(sweeps * batch)])
    lease = settings.jobs.lease_seconds
    with ExitStack() as stack:
        stack.callback(engine.dispose)
        for number in range(sweeps):
            token, now = f"bench/{os.getpid()}/{number}", utcnow()
            until = now + timedelta(seconds=lease)
            JobStore(engine).claim(token, batch, ["email"], now, until)
            keeper = stack.enter_context(LeaseKeeper(engine, lease, utcnow))
            keeper.hold(token, time.monotonic())
        yield


@contextmanager
def held_claims(url: str, count: int) -> Iterator[None]:
    """``count`` inbox claims kept by the process's heartbeat, as handlers in flight are."""
    settings = Settings.of(database_url=url, local_mode=True)
    engine = make_engine(url)
    inbox, lease = Inbox(engine), timedelta(seconds=settings.lease_seconds)
    heartbeats = Heartbeats()

    def renewer(claim: Claim) -> Callable[[], bool]:
        return lambda: inbox.heartbeat(claim, utcnow() + lease, utcnow())

    with ExitStack() as stack:
        stack.callback(engine.dispose)
        for number in range(count):
            message = PushMessage(f"m{number}", utcnow())
            claim = inbox.claim(f"bench:{number}", "deploy", message, utcnow(), lease)
            assert claim is not None
            stack.enter_context(heartbeats.kept(renewer(claim)))
        yield


def show(title: str, figures: dict[str, float]) -> None:
    print(f"{title:<34}" + "".join(f"{value:>22.1f}" for value in figures.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweeps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--claims", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    settings = Settings()
    print(
        f"{args.sweeps} held batches of {args.batch} jobs (job lease "
        f"{settings.jobs.lease_seconds} s, renewed every {settings.jobs.lease_seconds / 3:g} s), "
        f"{args.claims} inbox claims (lease {settings.lease_seconds} s, renewed every 1 s); "
        f"{args.seconds:g} s per window"
    )
    with database("heartbeat_cost") as conninfo:
        url = conninfo.replace("postgresql://", "postgresql+psycopg://")
        upgrade(url)
        print(f"{'':<34}" + "".join(f"{name:>22}" for name in FIGURES))
        floor = measure(conninfo, args.seconds)
        show("floor (nothing held)", floor)
        with held_batches(url, args.sweeps, args.batch), held_claims(url, args.claims):
            time.sleep(1.5)  # every holder has beaten once
            held = measure(conninfo, args.seconds)
        show("heartbeating", held)
        show("heartbeating less the floor", {k: held[k] - floor[k] for k in held})
        holders = args.sweeps + args.claims
        per = {k: (held[k] - floor[k]) / holders for k in held}
        show(f"per holder ({holders})", per)


if __name__ == "__main__":
    main()
