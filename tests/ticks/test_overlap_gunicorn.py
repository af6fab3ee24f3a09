"""The overlap policies across processes: a real gunicorn (two workers, four threads each) on
PostgreSQL, and a run that really goes on in one of them while other pushes of its task arrive
at once. ``skip``: of a slot's tick and eight run-nows pushed together, exactly one runs and every
other is recorded skipped; ``wait``: the next one is answered 429 with nothing written, and runs
once the first is over. Duplicates of a run-now run once."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.ticks.store import TickStore
from consumer.wire.envelopes_out import wrapped_body
from consumer.wire.timeutil import utcnow
from tests.conftest import Server, settings_env, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
RUN_NOWS = 8


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return tmp_path / "release"


@pytest.fixture
def server(
    postgres_url: str,
    release: Path,
    start_server: Callable[..., Server],
    monkeypatch: pytest.MonkeyPatch,
) -> Server:
    monkeypatch.setenv("TICK_TEST_RELEASE", str(release))
    settings = Settings(database_url=postgres_url, local_mode=True, plugins=("tests.ticks.plugin",))
    env = settings_env(settings, CONSUMER_THREADS="4", TICK_TEST_RELEASE=str(release))
    return start_server(env, workers=2)


def push(server: Server, task: str, **attributes: str) -> tuple[int, dict[str, Any]]:
    body = wrapped_body(attributes={"task": task, **attributes})
    response = requests.post(f"{server.url}/push", json=body, timeout=60)
    return response.status_code, response.json()


def test_skip_lets_one_run_of_many_pushed_at_once(
    server: Server, postgres_url: str, release: Path
) -> None:
    names: list[dict[str, str]] = [{}] + [{"run_now": f"r{i}"} for i in range(RUN_NOWS)]
    with ThreadPoolExecutor(len(names)) as pool:
        answers = [pool.submit(push, server, "slow", **attributes) for attributes in names]
        engine = make_engine(postgres_url)
        try:
            inbox = Inbox(engine)
            # Every push but the one that runs is answered while the run still holds on.
            wait_until(lambda: sum(a.done() for a in answers) == len(names) - 1, timeout=30)
            again = push(server, "slow", run_now="r0")  # a copy of a run-now pushed meanwhile
            release.touch()
            results = [answer.result(timeout=60) for answer in answers]
            rows = [inbox.get(body["key"]) for _, body in results]
        finally:
            engine.dispose()
    outcomes = sorted(body["outcome"] for _, body in results)
    assert outcomes == ["done"] + ["skipped"] * RUN_NOWS
    assert all(status == 200 for status, _ in results)  # acknowledged: nothing redelivered
    ran = next(body["key"] for _, body in results if body["outcome"] == "done")
    for _, body in results:
        if body["outcome"] == "skipped":
            assert body["reason"] == f"overlap: {ran} is still running"
    assert sorted(str(row.status) for row in rows if row) == ["done"] + ["skipped"] * RUN_NOWS
    assert again[1]["outcome"] in ("duplicate", "in-progress")  # r0's key has its one record


def test_wait_defers_the_next_push_until_the_run_is_over(
    server: Server, postgres_url: str, release: Path
) -> None:
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(push, server, "slow-wait")
        engine = make_engine(postgres_url)
        try:
            inbox = Inbox(engine)
            holder = TickStore(engine).run_holder
            wait_until(lambda: holder("slow-wait", utcnow()) is not None, timeout=30)
            status, body = push(server, "slow-wait", run_now="r1")
            assert (status, body["outcome"], body["status"]) == (429, "in-progress", "waiting")
            assert inbox.get("tick:slow-wait:run-now:r1") is None  # nothing written
            release.touch()
            assert first.result(timeout=60)[1]["outcome"] == "done"
            status, body = push(server, "slow-wait", run_now="r1")  # the retry
            assert (status, body["outcome"]) == (200, "done")
            assert push(server, "slow-wait", run_now="r1")[1]["outcome"] == "duplicate"
            row = inbox.get("tick:slow-wait:run-now:r1")
            assert row is not None and (row.status, row.attempts) == (Status.DONE, 1)
        finally:
            engine.dispose()
