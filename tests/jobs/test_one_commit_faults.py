"""A one-commit delivery (the jobs topic's enqueue) cut off from PostgreSQL or killed by SIGKILL
mid-transaction leaves its job once or not at all, and the redelivery completes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bench.support.cuts import Cutter, on_statement, sql
from bench.support.tcpproxy import TcpProxy
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.outcomes import Kind
from tests.jobs.conftest import job_count
from tests.jobs.test_topic import job_message

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    proxy = TcpProxy(5432)
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.mark.postgres
@pytest.mark.parametrize(
    "statement",
    [b"INSERT INTO jobs", b"UPDATE inbox", b"COMMIT"],
    ids=["effect", "outcome", "commit"],
)
def test_a_cut_mid_transaction_leaves_the_job_once_or_not_at_all(
    postgres_url: str, proxy: TcpProxy, statement: bytes
) -> None:
    proxied = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    settings = Settings(database_url=proxied, local_mode=True, plugins=("tests.jobs.kinds_plugin",))
    direct, engine = make_engine(postgres_url), make_engine(proxied)
    cutter = Cutter(proxy, 1.0)
    try:
        dispatcher = Dispatcher(settings, engine, build_registry(settings))
        message = job_message("m-cut", {}, job_kind="record")
        proxy.watch = on_statement(cutter, sql(statement), 1)
        first = dispatcher.dispatch(message)
        assert cutter.made
        assert first.kind in (Kind.UNAVAILABLE, Kind.RETRY), first
        assert job_count(direct) <= 1
        cutter.ended.wait(10)
        proxy.watch = None
        again = dispatcher.dispatch(message)
        assert again.kind in (Kind.DONE, Kind.DUPLICATE), again
        assert job_count(direct) == 1
        row = dispatcher.inbox.get(again.key)
        assert row is not None and row.status is Status.DONE
    finally:
        engine.dispose()
        direct.dispose()


@pytest.mark.slow
def test_a_process_killed_mid_transaction_leaves_nothing_and_the_redelivery_makes_one_job(
    database_url: str, engine: Engine, settings: Settings
) -> None:
    job_settings = settings.with_values(plugins=("tests.jobs.kinds_plugin",))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.jobs.one_commit_child", database_url, "m-killed"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert child.stdout is not None
    with child.stdout:
        try:
            assert child.stdout.readline().strip() == "written"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
    assert job_count(engine) == 0
    dispatcher = Dispatcher(job_settings, engine, build_registry(job_settings))
    key = dispatcher.classify(job_message("m-killed")).key
    assert dispatcher.inbox.get(key) is None
    outcome = dispatcher.dispatch(job_message("m-killed"))
    assert (outcome.kind, outcome.details["attempt"], outcome.details["inserted"]) == (
        Kind.DONE, 1, True)  # fmt: skip
    assert job_count(engine) == 1
