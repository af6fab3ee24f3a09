"""Faults under the sweep, with real components: a TCP proxy between the sweep and PostgreSQL that
is cut while a batch's record write is under way, and a sweeper killed with SIGKILL mid-batch.
Effects are counted at a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.smtp import Envelope, Session
from sqlalchemy import Engine

from bench.support import smtp_server
from bench.support.smtp_server import Recorder
from bench.support.tcpproxy import TcpProxy
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.sweep import Sweeper
from consumer.plugins import build_registry
from tests.jobs.test_multiprocess import add_emails, mail_env, start_sweeps, status_counts

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


class CuttingRecorder(Recorder):
    """Cuts the database proxy just before it accepts message ``at`` (a batch's last): the
    sweeper only hears "250" once the database is gone, so its record write meets the cut."""

    cuts: dict[int, float]
    proxy: TcpProxy

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        seconds = self.cuts.pop(len(self.ids) + 1, None)
        if seconds is not None:
            self.proxy.stop()
            threading.Timer(seconds, self.proxy.start).start()
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def db(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def test_database_cuts_during_record_writes_send_each_email_once(
    postgres_url: str, db: Engine
) -> None:
    proxy = TcpProxy(5432)
    proxy.start()
    recorder = CuttingRecorder()
    recorder.proxy = proxy
    recorder.cuts = {110: 1.5, 210: 5.0}  # batches of 10 (pace), then 100, 100, 90
    controller = smtp_server.start(recorder)
    add_emails(db, 300)
    proxied = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    settings = Settings.of(
        database_url=proxied, local_mode=True, smtp_host="127.0.0.1", smtp_port=recorder.port,
        smtp_security="none",
    )  # fmt: skip
    engine = make_engine(proxied)
    try:
        sweeper = Sweeper(settings, engine, build_registry(settings).job_kinds)
        summary = sweeper.run(time.monotonic() + 50)
    finally:
        engine.dispose()
        controller.stop()
        proxy.stop()
    assert recorder.cuts == {}, "a cut was not made"
    sent = recorder.message_ids()
    assert len(set(sent)) == 300, "an email was lost"
    assert len(sent) == 300, [m for m, n in Counter(sent).items() if n > 1][:5]
    assert status_counts(db) == {"done": 300}
    assert (summary.done, summary.lost, summary.stopped) == (300, 0, "drained")


def test_a_killed_sweepers_batch_is_finished_within_seconds(
    postgres_url: str, db: Engine, smtp: Recorder
) -> None:
    """Default settings: the batch's short lease is not renewed once its sweeper is dead."""
    total, batch = 300, 50
    add_emails(db, total)
    smtp.delay = 0.01  # a batch of 50 takes half a second: time to kill inside one
    env = mail_env(postgres_url, smtp, CONSUMER_SWEEP_BATCH_SIZE=str(batch))
    (victim,) = start_sweeps(1, env)
    deadline = time.monotonic() + 60
    while len(smtp.message_ids()) < 90 and time.monotonic() < deadline:  # batches: 10, 50, 50..
        time.sleep(0.005)
    os.kill(victim.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    victim.communicate()
    smtp.delay = 0
    assert 0 < status_counts(db).get("running", 0) <= batch

    settings = Settings.of(
        database_url=postgres_url, local_mode=True, smtp_host="127.0.0.1", smtp_port=smtp.port,
        smtp_security="none", sweep_batch_size=batch,
    )  # fmt: skip
    kinds = build_registry(settings).job_kinds
    while status_counts(db) != {"done": total}:
        assert time.monotonic() - killed_at < 20, status_counts(db)
        Sweeper(settings, db, kinds).run(time.monotonic() + 5)
        time.sleep(0.5)
    sent = Counter(smtp.message_ids())
    assert len(sent) == total
    assert sum(sent.values()) - total <= batch, "only the killed batch may be sent again"
