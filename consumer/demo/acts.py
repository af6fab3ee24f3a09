"""The two acts. Each starts its own database, SMTP sink and processes, and stops every one of
them (by process group) when it ends, fails or is interrupted."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests
from sqlalchemy import Engine, text

from consumer.db.engine import make_engine
from consumer.demo.balancer import Balancer
from consumer.demo.database import fresh_database
from consumer.demo.mailbox_jobs import Tally, enqueue_emails
from consumer.demo.processes import (
    Child,
    descendants,
    free_port,
    pubsub_emulator,
    spawn,
    wait_until,
)
from consumer.demo.scheduler import DirectTicks, EmulatorTicks, Ticker, TickSource
from consumer.demo.sink import MailSink

Progress = Callable[[str], None]
UNFINISHED = text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")
HELD = text("SELECT claimed_by FROM jobs WHERE status = 'running'")
ACK_DEADLINE_SECONDS = 10
TICK_EVERY_SECONDS = 2
SWEEP_BATCH = 100
JOB_LEASE_SECONDS = 3
WORKERS, THREADS = 2, 4
"""A pod's gunicorn workers and their handler threads: at most this many sweeps run in it."""


@dataclass(frozen=True)
class Options:
    jobs: int = 1000
    pods: int = 3
    kill: bool = True
    database: str = "sqlite"
    emulator: bool | None = None
    """``None``: use Google's Pub/Sub emulator when it is installed."""
    redeliver_every: int = 5
    """The balancer delivers every n-th request a second time (0: never)."""
    timeout_seconds: float = 600


@dataclass
class ActResult:
    name: str
    tally: Tally
    seconds: float
    drained: bool
    per_pod: list[int] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    kills: int = 0
    held_jobs: int = 0
    """Jobs the killed pod held (claimed, not yet recorded done) at the kill."""
    duplicate_bound: int = 0
    """Sweeps the killed pod was running (one job each may be sent again; at most its
    threads)."""
    threads: int = WORKERS * THREADS
    takeover_seconds: float | None = None
    """From the kill until no job is held by the killed pod (other pods' sweeps took them)."""


@dataclass(frozen=True)
class Kill:
    held_jobs: int
    sweeps: int
    takeover_seconds: float | None


def before(options: Options, workdir: Path, progress: Progress) -> ActResult:
    """Three replicas with the original in-process timer, no claims."""
    with ExitStack() as stack:
        url, sink, engine = _stage(stack, options, workdir, "before")
        started = time.monotonic()
        for number in range(1, options.pods + 1):
            pod = spawn(f"timer-pod-{number}", _naive_pod(url, sink.port),
                        workdir / f"before-{number}.log", _env())  # fmt: skip
            stack.callback(pod.stop)
        drained = _wait_drained(engine, sink, options, started, progress, "before")
        seconds = time.monotonic() - started
        return ActResult(
            "before", Tally.of(options.jobs, sink.counter.snapshot()), seconds, drained
        )


def after(options: Options, workdir: Path, progress: Progress) -> ActResult:
    """``consumer serve`` pods behind the balancer, fed duplicated ticks, one pod killed."""
    with ExitStack() as stack:
        url, sink, engine = _stage(stack, options, workdir, "after")
        ports = [free_port() for _ in range(options.pods)]
        pods = {port: _start_pod(stack, port, url, sink.port, workdir) for port in ports}
        balancer = stack.enter_context(Balancer(ports, options.redeliver_every))
        source = _tick_source(options, balancer.url, workdir)
        stack.callback(source.close)
        ticker = Ticker(source, TICK_EVERY_SECONDS)
        stack.callback(ticker.stop)
        started = time.monotonic()
        ticker.start()
        killed = _kill_one_mid_sweep(
            options, pods, balancer, sink, stack, engine, url, workdir, progress
        )
        kill = killed or Kill(0, 0, None)
        drained = _wait_drained(engine, sink, options, started, progress, "after")
        seconds = time.monotonic() - started
        result = ActResult("after", Tally.of(options.jobs, sink.counter.snapshot()), seconds,
                           drained, kills=int(killed is not None), held_jobs=kill.held_jobs,
                           duplicate_bound=kill.sweeps,
                           takeover_seconds=kill.takeover_seconds)  # fmt: skip
        result.per_pod = [balancer.traffic.per_pod[port] for port in ports]
        result.statuses = Counter(balancer.traffic.statuses)
        result.notes.append(f"ticks: {source.name}; {balancer.traffic.redelivered} redelivered")
        return result


def _naive_pod(url: str, smtp_port: int) -> list[str]:
    return [
        sys.executable, "-m", "consumer.demo.naive", "--database", url,
        "--smtp-port", str(smtp_port), "--every", str(TICK_EVERY_SECONDS),
    ]  # fmt: skip


def _stage(
    stack: ExitStack, options: Options, workdir: Path, act: str
) -> tuple[str, MailSink, Engine]:
    """A fresh database holding the act's email jobs, and an SMTP sink to count them."""
    url = stack.enter_context(fresh_database(options.database, workdir, act))
    sink = stack.enter_context(MailSink())
    engine = make_engine(url)
    stack.callback(engine.dispose)
    enqueue_emails(engine, options.jobs)
    return url, sink, engine


def _env(**settings: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    return {**inherited, "PYTHONUNBUFFERED": "1", **settings}


def _pod_env(port: int, url: str, smtp_port: int) -> dict[str, str]:
    return _env(
        CONSUMER_BIND=f"127.0.0.1:{port}", CONSUMER_DATABASE_URL=url, CONSUMER_LOCAL_MODE="true",
        CONSUMER_LOCAL_TICK_SECONDS="0", CONSUMER_WORKERS=str(WORKERS),
        CONSUMER_THREADS=str(THREADS), CONSUMER_LOG_LEVEL="WARNING",
        CONSUMER_SMTP_HOST="127.0.0.1", CONSUMER_SMTP_PORT=str(smtp_port),
        CONSUMER_SMTP_SECURITY="none", CONSUMER_MAIL_FROM="reports@example.com",
        CONSUMER_ACK_DEADLINE_SECONDS=str(ACK_DEADLINE_SECONDS), CONSUMER_SAFETY_MARGIN_SECONDS="2",
        CONSUMER_TICK_PERIODS=f"sweep={TICK_EVERY_SECONDS}",
        CONSUMER_SWEEP_BATCH_SIZE=str(SWEEP_BATCH),
        CONSUMER_JOB_LEASE_SECONDS=str(JOB_LEASE_SECONDS),
    )  # fmt: skip


def _start_pod(stack: ExitStack, port: int, url: str, smtp_port: int, workdir: Path) -> Child:
    command = [sys.executable, "-m", "consumer", "serve"]
    log = workdir / f"pod-{port}.log"
    pod = spawn(f"pod :{port}", command, log, _pod_env(port, url, smtp_port))
    stack.callback(pod.stop)
    wait_until(pod, lambda: _healthy(port), timeout=60)
    return pod


def _healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok
    except requests.RequestException:
        return False


def _tick_source(options: Options, push_url: str, workdir: Path) -> TickSource:
    use_emulator = options.emulator if options.emulator is not None else bool(pubsub_emulator())
    if use_emulator:
        return EmulatorTicks(push_url, ACK_DEADLINE_SECONDS, workdir)
    return DirectTicks(push_url)


def _kill_one_mid_sweep(
    options: Options, pods: dict[int, Child], balancer: Balancer, sink: MailSink,
    stack: ExitStack, engine: Engine, url: str, workdir: Path, progress: Progress,
) -> Kill | None:  # fmt: skip
    """Once a third of the mail is out, SIGKILL the pod serving the most ticks, then restart it
    once the other pods have taken its jobs over. Returns how many jobs its workers held at that
    moment and in how many sweeps (each sweep records its results as it goes, so only the job
    each was running may be sent twice), and how long the takeover took. ``None``: no kill."""
    if not options.kill:
        return None
    deadline = time.monotonic() + options.timeout_seconds
    while time.monotonic() < deadline and _unfinished(engine) > 0:
        busiest = balancer.traffic.busiest()
        if busiest is not None and sink.counter.delivered() >= options.jobs // 3:
            port, sweeps = busiest
            workers = descendants(pods[port].process.pid)
            pods[port].kill()
            killed_at = time.monotonic()
            held, claims = _held_by(engine, workers)  # their leases outlive this by seconds
            progress(f"after: SIGKILLed the pod on :{port} during {sweeps} tick(s), holding "
                     f"{held} jobs in {claims} sweep(s)")  # fmt: skip
            takeover = _taken_over(engine, workers, killed_at)
            progress("after: its jobs were taken over; restarting it")
            pods[port] = _start_pod(stack, port, url, sink.port, workdir)
            return Kill(held, claims, takeover)
        time.sleep(0.05)
    return None


def _taken_over(engine: Engine, pids: set[int], killed_at: float) -> float | None:
    """Seconds from the kill until no job is held by ``pids`` any more (``None``: not in 60 s)."""
    while time.monotonic() - killed_at < 60:
        if _held_by(engine, pids)[0] == 0:
            return time.monotonic() - killed_at
        time.sleep(0.05)
    return None


def _held_by(engine: Engine, pids: set[int]) -> tuple[int, int]:
    """Running jobs claimed by these processes (a claim token is ``host/PID/random``), and the
    claims (sweeps) they belong to."""
    if not pids:
        return 0, 0
    with engine.connect() as connection:
        tokens = connection.execute(HELD).scalars().all()
    ours = [token for token in tokens if int(token.split("/")[-2]) in pids]
    return len(ours), len(set(ours))


def _wait_drained(
    engine: Engine, sink: MailSink, options: Options, started: float, progress: Progress,
    act: str,
) -> bool:  # fmt: skip
    """Until no job is pending or running and the sink has been quiet for a moment."""
    last_report, quiet_since, last_count = 0.0, time.monotonic(), -1
    while time.monotonic() - started < options.timeout_seconds:
        delivered = sink.counter.delivered()
        if delivered != last_count:
            quiet_since, last_count = time.monotonic(), delivered
        if time.monotonic() - last_report >= 2:
            progress(f"{act}: {delivered:,} delivered for {options.jobs:,} jobs, "
                     f"{time.monotonic() - started:.0f} s")  # fmt: skip
            last_report = time.monotonic()
        if _unfinished(engine) == 0 and time.monotonic() - quiet_since > 1.5:
            return True
        time.sleep(0.2)
    return False


def _unfinished(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(UNFINISHED).scalar_one())


@contextmanager
def workspace(root: Path | None) -> Iterator[Path]:
    """A work directory for databases and logs; a temporary one unless ``root`` is given."""
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        yield root
        return
    with tempfile.TemporaryDirectory(prefix="consumer-demo-") as name:
        yield Path(name)
