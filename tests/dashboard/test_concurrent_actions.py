"""Operators clicking at once: concurrent replays of one dead event over real HTTP (two gunicorn
workers, PostgreSQL) run its handler exactly once; the losers are told, nothing runs twice."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from consumer.deploy.store import WarmRuns
from consumer.inbox.model import Status as EventStatus
from consumer.inbox.store import Inbox
from tests.dashboard.conftest import TOKEN, Running

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
CLICKS = 12


def test_concurrent_replays_of_one_event_run_it_once(running_dashboard: Running) -> None:
    running_dashboard.switch.touch()
    key = running_dashboard.seeded.dead_keys[0]
    url = running_dashboard.server.url + "/actions/replay"
    csrf = "c" * 43

    def click(_: int) -> int:
        response = requests.post(
            url,
            data={"key": key, "csrf": csrf},
            cookies={"consumer_dashboard_csrf": csrf},
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )
        return response.status_code

    with ThreadPoolExecutor(CLICKS) as pool:
        statuses = Counter(pool.map(click, range(CLICKS)))
    assert set(statuses) <= {200, 409} and statuses[200] >= 1, statuses
    row = Inbox(running_dashboard.engine).get(key)
    assert row is not None and row.status is EventStatus.DONE
    assert len(WarmRuns(running_dashboard.engine).for_key(key)) == 1  # the effect, once
