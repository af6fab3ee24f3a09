"""The consumer's jobs beside four PostgreSQL job queues (not a test): graphile-worker and pg-boss
(Node.js), procrastinate and pgqueuer (Python).

The peers are installed by the bench itself into a scratch directory (``--scratch``, kept between
runs): the Node.js packages with ``npm install --prefix``, the Python ones into a virtualenv of
their own. Every run of every peer gets a fresh database on the one PostgreSQL server; the peers
take turns within each repeat, so the machine's drift falls on all of them. One run:

  setup    the peer's schema (not timed).
  enqueue  ``--jobs`` no-op jobs (payload ``{"n": i}``, no keys) in one batch, each peer's own
           batch call: jobs/s.
  work     one worker, the peer's defaults otherwise, drains them: jobs/s from its ``ready`` to
           its ``done``, and CPU per job of the worker process and of the database's backends
           (read from ``/proc``) over the same span.
Each worker reports how many jobs it ran and how many distinct ``n`` among them: a run counts only
if every job ran exactly once. The last line gives the medians (``peers: ...``); ``n/a`` for a
peer not run.

    python -m bench.peers [--jobs 5000] [--repeat 3] [--peers consumer,pg-boss] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from bench.pgdb import database
from bench.support.cpu import backends, cpu_seconds, spent

HERE = Path(__file__).resolve().parent / "support"
PEERS = ("consumer", "graphile-worker", "pg-boss", "procrastinate", "pgqueuer")
NODE_PACKAGES = ("graphile-worker@0.16.6", "pg-boss@10.4.2", "pg@8")
"""Versions that run on Node.js 20 (the newest of each want 22)."""
PYTHON_PACKAGES = ("procrastinate==3.10.0", "pgqueuer==1.6.0", "psycopg[binary]>=3.2")
TIMEOUT = 600


class Run(NamedTuple):
    enqueue_rate: float
    work_rate: float
    cpu_us: float
    """Worker + database backends, per job."""


def install(peers: list[str], scratch: Path) -> None:
    """The peers' packages, once per scratch directory."""
    scratch.mkdir(parents=True, exist_ok=True)
    node = [p for p in peers if p in ("graphile-worker", "pg-boss")]
    if node and not (scratch / "node" / "node_modules" / "pg-boss").exists():
        command = ["npm", "install", "--prefix", str(scratch / "node"), "--no-audit", "--no-fund"]
        subprocess.run([*command, *NODE_PACKAGES], check=True, capture_output=True, timeout=300)
    python = [p for p in peers if p in ("procrastinate", "pgqueuer")]
    if python and not (scratch / "venv" / "ok").exists():
        subprocess.run([sys.executable, "-m", "venv", str(scratch / "venv")], check=True)
        pip = [str(scratch / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, *PYTHON_PACKAGES], check=True, capture_output=True, timeout=300)
        (scratch / "venv" / "ok").touch()


def command(peer: str, step: str, conninfo: str, jobs: int, scratch: Path) -> list[str]:
    if peer in ("graphile-worker", "pg-boss"):
        return ["node", str(HERE / "peer_node.mjs"), peer, step, conninfo, str(jobs)]
    python = sys.executable if peer == "consumer" else str(scratch / "venv" / "bin" / "python")
    return [python, str(HERE / "peer_python.py"), peer, step, conninfo, str(jobs)]


def environment(scratch: Path) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "NODE_PEERS_DIR": str(scratch / "node"), "PYTHONPATH": path}


def run_peer(peer: str, jobs: int, scratch: Path) -> Run:
    env = environment(scratch)
    with database("peers") as conninfo:
        for step in ("setup", "enqueue"):
            done = subprocess.run(
                command(peer, step, conninfo, jobs, scratch), env=env, capture_output=True,
                text=True, timeout=TIMEOUT, check=False,
            )  # fmt: skip
            assert done.returncode == 0, (
                f"{peer} {step}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        enqueued = float(done.stdout.split("enqueued ")[-1].split()[0])
        return work(peer, jobs, conninfo, scratch, env, jobs / enqueued)


def work(
    peer: str, jobs: int, conninfo: str, scratch: Path, env: dict[str, str], enqueue_rate: float
) -> Run:
    """One worker drains the queue; its CPU and its backends' over ``ready`` .. ``done``."""
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            command(peer, "work", conninfo, jobs, scratch), env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=errors, text=True,
        )  # fmt: skip
        try:
            seconds, cpu, line = drain(process, conninfo)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        if not line.startswith("done "):
            errors.seek(0)
            raise RuntimeError(f"{peer}'s worker: {line!r}\n{errors.read()[-3000:]}")
    ran, distinct = (int(part) for part in line.split()[1:3])
    assert ran == distinct == jobs, f"{peer}: ran {ran} jobs, {distinct} distinct, of {jobs}"
    return Run(enqueue_rate, jobs / seconds, cpu * 1e6 / jobs)


def drain(process: subprocess.Popen[str], conninfo: str) -> tuple[float, float, str]:
    """Seconds and CPU seconds (the worker's and the backends') from ``ready`` to ``done``, and
    the worker's last line; then the worker is told to exit."""
    assert process.stdin is not None and process.stdout is not None
    line = process.stdout.readline()
    if line != "ready\n":
        return 0.0, 0.0, line
    before = cpu_seconds([process.pid]), cpu_seconds(backends(conninfo))
    started = time.perf_counter()
    line = process.stdout.readline()
    seconds = time.perf_counter() - started
    cpu = spent(before[0], cpu_seconds([process.pid]))
    cpu += spent(before[1], cpu_seconds(backends(conninfo)))
    process.stdin.close()
    process.wait(timeout=60)
    return seconds, cpu, line


def peers_line(runs: dict[str, list[Run]]) -> str:
    def figures(field: int, digits: int) -> str:
        return " ".join(
            f"{peer} {statistics.median(r[field] for r in runs[peer]):.{digits}f}"
            if runs.get(peer) else f"{peer} n/a"
            for peer in PEERS
        )  # fmt: skip

    return (f"peers: jobs/s 1 worker {figures(1, 0)}; cpu us/job {figures(2, 1)}; "
            f"batch enqueue jobs/s {figures(0, 0)}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peers", default=",".join(PEERS), help="a comma-separated subset")
    parser.add_argument(
        "--scratch", type=Path, default=Path(tempfile.gettempdir()) / "consumer-bench-peers"
    )
    args = parser.parse_args(argv)
    chosen = [peer for peer in PEERS if peer in args.peers.split(",")]
    unknown = set(args.peers.split(",")) - set(PEERS)
    if unknown or not chosen:
        parser.error(f"--peers: choose among {', '.join(PEERS)}")
    install(chosen, args.scratch)
    runs: dict[str, list[Run]] = {peer: [] for peer in chosen}
    for repeat in range(args.repeat):
        for peer in chosen:
            runs[peer].append(run_peer(peer, args.jobs, args.scratch))
            last = runs[peer][-1]
            print(f"  run {repeat + 1} {peer:<16} enqueue {last.enqueue_rate:9,.0f} jobs/s  "
                  f"1 worker {last.work_rate:7,.0f} jobs/s  cpu {last.cpu_us:7.1f} us/job",
                  flush=True)  # fmt: skip
    print(peers_line(runs))


if __name__ == "__main__":
    main()
