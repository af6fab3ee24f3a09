"""A sweeper process killed with SIGKILL mid-batch repeats at most one effect per sweeping thread
(results are recorded as the sweep goes, not once per batch), and its jobs are taken over within
5 s (a 3 s lease renewed every second). Effects are counted at a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from bench.support.smtp_server import Recorder
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.schema import jobs
from consumer.jobs.sweep import Sweeper
from consumer.plugins import build_registry
from tests.jobs.test_multiprocess import add_emails, mail_env, status_counts

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]
THREADS, BATCH, TOTAL = 3, 40, 360


@pytest.fixture
def db(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def held_by(engine: Engine, pid: int) -> int:
    """Running jobs claimed by process ``pid`` (a claim token is ``host/PID/random``)."""
    query = select(jobs.c.claimed_by).where(jobs.c.status == "running")
    with engine.connect() as connection:
        tokens = connection.execute(query).scalars().all()
    return sum(1 for token in tokens if token and int(token.split("/")[-2]) == pid)


def start_victim(env: dict[str, str]) -> subprocess.Popen[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    command = [sys.executable, "-m", "tests.jobs.threaded_sweeps", str(THREADS)]
    return subprocess.Popen(command, env={**inherited, **env}, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_a_sweeper_killed_mid_batch_repeats_at_most_one_email_per_thread(
    postgres_url: str, db: Engine, smtp: Recorder
) -> None:
    add_emails(db, TOTAL)
    smtp.delay = 0.02  # an email takes a little while: a thread's batch of 40 runs ~1 s
    env = mail_env(postgres_url, smtp, CONSUMER_SWEEP_BATCH_SIZE=str(BATCH))
    victim = start_victim(env)
    try:
        deadline = time.monotonic() + 60  # a loaded machine may take long to start it
        while len(smtp.message_ids()) < 120:  # batches of 10, then of 40 per thread
            assert victim.poll() is None, victim.communicate()
            assert time.monotonic() < deadline, "the sweeper never got going"
            time.sleep(0.005)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
    finally:
        victim.kill()
        victim.communicate()
    smtp.delay = 0
    held = held_by(db, victim.pid)
    assert held > 2 * THREADS, f"the kill did not land mid-batch ({held} jobs held)"

    settings = Settings.of(
        database_url=postgres_url, local_mode=True, smtp_host="127.0.0.1", smtp_port=smtp.port,
        smtp_security="none", sweep_batch_size=BATCH,
    )  # fmt: skip
    kinds = build_registry(settings).job_kinds
    stop = threading.Event()

    def sweep_until_done() -> None:  # the other pods' sweeps, ticked every 0.1 s
        while not stop.is_set() and status_counts(db) != {"done": TOTAL}:
            Sweeper(settings, db, kinds).run(time.monotonic() + 5)
            time.sleep(0.1)

    sweeps = threading.Thread(target=sweep_until_done)
    sweeps.start()
    try:
        while held_by(db, victim.pid) and time.monotonic() - killed_at < 30:
            time.sleep(0.02)
        taken_over_after = time.monotonic() - killed_at
        sweeps.join(timeout=30)
    finally:
        stop.set()
        sweeps.join()
    assert status_counts(db) == {"done": TOTAL}

    sent = Counter(smtp.message_ids())
    assert len(sent) == TOTAL, "an email was lost"
    twice = [message_id for message_id, count in sent.items() if count > 1]
    print(f"crash bound: {held} jobs held at the kill, {len(twice)} sent twice (bound {THREADS}),"
          f" taken over {taken_over_after:.1f} s after the kill")  # fmt: skip
    assert max(sent.values()) <= 2
    assert len(twice) <= THREADS, f"{len(twice)} sent twice of the {held} jobs held"
    assert taken_over_after <= 5.0, f"taken over {taken_over_after:.1f} s after the kill"
