"""The overview's plots in the real Chromium, over real HTTP from a real gunicorn on PostgreSQL:
each plot is an SVG the browser lays out, with a visible bar segment per count and the totals
the tables hold. The screenshot goes to ``DASHBOARD_SCREENSHOTS`` (``docs/`` when refreshing)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from consumer.wire.timeutil import utcnow
from tests.dashboard.browser import chromium_page
from tests.dashboard.conftest import TOKEN, Running
from tests.dashboard.history import busy_hour

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SEGMENTS = """plot => [...document.querySelectorAll(`figure[data-plot="${plot}"] svg rect`)]
  .map(r => [r.getAttribute('class'), r.getBoundingClientRect().width,
             r.getBoundingClientRect().height])"""


def sign_in(page: Any, url: str) -> None:
    assert page.goto(url + "/").status == 401
    page.fill("input[name=token]", TOKEN)
    page.click("text=Sign in >> nth=-1")
    page.wait_for_selector("h1:has-text('Overview')")


def test_the_plots_render_in_chromium(running_dashboard: Running, tmp_path: Path) -> None:
    written = busy_hour(running_dashboard.engine, utcnow())
    url = running_dashboard.server.url
    with chromium_page(tmp_path / "profile") as page:
        sign_in(page, url)
        page.evaluate("localStorage.setItem('consumer-dashboard-refresh', 'off')")
        page.reload()
        figures = page.locator("#activity figure")
        assert figures.count() == 4
        totals = {
            figures.nth(n).get_attribute("data-plot"): int(
                figures.nth(n).get_attribute("data-total")
            )
            for n in range(4)
        }
        seeded = 4  # the fixture's own deliveries: two dead deploys, an unroutable tick, a sweep
        assert totals["deliveries-60"] == sum(written.values()) + seeded
        segments = page.evaluate(SEGMENTS, "deliveries-60")
        classes = {cls for cls, _, _ in segments}
        assert {"s-done", "s-failed", "s-dead"} <= classes
        assert all(width > 1 and height > 0 for _, width, height in segments)
        assert page.evaluate(SEGMENTS, "jobs-60") and totals["jobs-24"] >= totals["jobs-60"] > 0
        shots = Path(os.environ.get("DASHBOARD_SCREENSHOTS") or tmp_path)
        page.locator("#activity").screenshot(path=str(shots / "dashboard-plots.png"))
