"""One chaos run: everything started (and stopped again, by process group, however the run
ends), the load and the faults played for the given time, a bounded drain, then the ledger."""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from bench.chaos.balancer import DeadlineBalancer
from bench.chaos.cluster import Cluster
from bench.chaos.diagnose import diagnosis
from bench.chaos.emulators import emulators
from bench.chaos.faults import Chaos
from bench.chaos.ledger import Account, Records, account
from bench.chaos.load import Load, Rates
from bench.chaos.plan import Window, plan
from bench.chaos.pods import ACK_DEADLINE_SECONDS, BUCKET, Pods, Wiring
from bench.chaos.report import (
    Timeline,
    fault_lines,
    last_line,
    ledger_lines,
    recoveries,
    throughput,
)
from bench.chaos.sinks import Target, TimedRecorder, mail_sink
from bench.chaos.watch import ExitWatcher
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.demo.processes import free_port

DATABASE = "consumer"
PODS = 3
REDELIVER_EVERY = 10
"""The balancer also delivers every tenth request a second time, as Pub/Sub now and then does."""
DRAIN_POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Options:
    seconds: float
    drain_seconds: float
    seed: int
    rates: Rates
    workdir: Path | None


BEGAN = time.monotonic()


def progress(line: str) -> None:
    print(f"[{time.monotonic() - BEGAN:6.1f} s] {line}", file=sys.stderr, flush=True)


def run(options: Options) -> int:
    """Prints the report on stdout (its last line is the summary); 1 on any loss or any
    unattributed duplicate."""
    rng = random.Random(options.seed)
    load_before = os.getloadavg()[0]
    with workspace(options.workdir) as workdir, ExitStack() as stack:
        progress(f"chaos: seed {options.seed}, logs in {workdir}")
        cluster = stack.enter_context(Cluster())
        cluster.create_database(DATABASE)
        upgrade(cluster.url(DATABASE, proxied=False))
        engine = make_engine(cluster.url(DATABASE, proxied=False))
        stack.callback(engine.dispose)
        progress(f"chaos: PostgreSQL {cluster.bin.parent.name} up on its own port")
        mail = stack.enter_context(mail_sink())
        target = Target()
        stack.callback(target.close)
        ports = [free_port() for _ in range(PODS)]
        balancer = stack.enter_context(
            DeadlineBalancer(ports, REDELIVER_EVERY, ACK_DEADLINE_SECONDS)
        )
        stubs = stack.enter_context(emulators(workdir, balancer.url, ACK_DEADLINE_SECONDS, BUCKET))
        progress("chaos: Pub/Sub emulator and fake-gcs-server up")
        wiring = Wiring(cluster.url(DATABASE, proxied=True), mail.port, target.url,
                        stubs.gcs_url, workdir)  # fmt: skip
        pods = Pods(ports, wiring)
        stack.callback(pods.stop_all)
        pods.start_all()
        load = Load(stubs, pods.live, options.rates)
        stack.callback(load.close)
        chaos = Chaos(pods, cluster, target, mail, engine, rng, progress)
        stack.callback(chaos.stop)
        exits = ExitWatcher(workdir, engine, chaos.record)
        stack.callback(exits.stop)
        exits.start()
        started = time.time()
        progress(f"chaos: {PODS} pods up; load and faults for {options.seconds:.0f} s")
        load.start()
        chaos.start(plan(Window.of(options.seconds), rng), started)
        _wait(started + options.seconds, mail)
        load.stop()
        chaos.stop()
        found = _drain(load, engine, mail, target, chaos, options.drain_seconds)
        exits.stop()
        found = _account(load, engine, mail, target, chaos)
        ended = time.time()
        progress(f"chaos: drained in {ended - started - options.seconds:.0f} s; stopping")
        load.close()
        print(f"machine: {os.cpu_count()} cores, load average {load_before:.1f} before the run, "
              f"{os.getloadavg()[0]:.1f} at its end; this process (balancer, sinks, load) used "
              f"{_cpu_seconds():.0f} CPU s")  # fmt: skip
        status = _report(found, engine, mail, target, chaos, started, ended, workdir)
    progress(f"chaos: everything stopped {time.time() - ended:.0f} s after the drain")
    return status


def _wait(until: float, mail: TimedRecorder) -> None:
    while (left := until - time.time()) > 0:
        time.sleep(min(10.0, left))
        progress(f"chaos: {len(mail.stamped())} emails so far, {max(0.0, left - 10):.0f} s left")


def _drain(load: Load, engine: Engine, mail: TimedRecorder, target: Target, chaos: Chaos,
           seconds: float) -> Account:  # fmt: skip
    """Until nothing is lost (every event terminal, every job done, every effect seen) and no
    hook is still being announced, or ``seconds`` have passed."""
    deadline = time.time() + seconds
    while True:
        found = _account(load, engine, mail, target, chaos)
        pending = load.hooks_pending()
        if (not found.lost and not pending) or time.time() >= deadline:
            return found
        progress(f"chaos: draining, {sum(found.lost.values())} outstanding, "
                 f"{pending} hooks unacknowledged")  # fmt: skip
        time.sleep(DRAIN_POLL_SECONDS)


def _account(load: Load, engine: Engine, mail: TimedRecorder, target: Target,
             chaos: Chaos) -> Account:  # fmt: skip
    try:
        records = Records.read(engine)
    except Exception as exc:  # the database may be restarting: nothing is settled yet
        found = Account()
        found.lose("records", f"the database could not be read: {exc}")
        return found
    return account(load.published, records, mail.stamped(), target.calls(), chaos.faults)


def _report(found: Account, engine: Engine, mail: TimedRecorder, target: Target, chaos: Chaos,
            started: float, ended: float, workdir: Path) -> int:  # fmt: skip
    records = Records.read(engine)
    faults = sorted(chaos.faults, key=lambda fault: fault.start)
    timeline = Timeline.of(mail.stamped(), target.calls(), records)
    recovered = recoveries(faults, timeline, records)
    print("\n".join(fault_lines(faults, recovered, found, started)), end="\n\n")
    print("\n".join(throughput(timeline, faults, started, ended)), end="\n\n")
    print("\n".join(ledger_lines(found, started)))
    unattributed = len(found.duplicates) - found.attributed
    if found.lost or unattributed:
        print("\n".join(diagnosis(engine, workdir, started)))
    print(last_line(len(faults), found, recovered), flush=True)
    return 1 if found.lost or unattributed else 0


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@contextmanager
def workspace(root: Path | None) -> Iterator[Path]:
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="chaos-") as name:
        yield Path(name)
