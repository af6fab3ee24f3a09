"""The overview's plots count what the tables hold, bucket by bucket, within their window only,
on both databases; the SVG has a bar segment per non-zero count, titled with it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from consumer.dashboard import activity, plots
from tests.dashboard.history import add_deliveries, add_jobs

NOW = datetime(2026, 12, 1, 9, 30, 20, tzinfo=UTC)


def test_deliveries_are_counted_per_minute_by_outcome_within_the_hour(engine: Engine) -> None:
    add_deliveries(engine, NOW - timedelta(seconds=15), "done", 3)  # this minute (09:30)
    add_deliveries(engine, NOW - timedelta(minutes=16), "done", 2)  # 09:14
    add_deliveries(engine, NOW - timedelta(minutes=16, seconds=5), "dead", 1)
    add_deliveries(engine, NOW - timedelta(minutes=75), "done", 50)  # before the window
    series = activity.deliveries(engine, NOW, activity.HOUR)
    assert len(series.starts) == 60 and series.starts[-1] == NOW.replace(second=0)
    at_0914 = series.starts.index(datetime(2026, 12, 1, 9, 14, tzinfo=UTC))
    assert series.counts["done"][-1] == 3 and series.counts["done"][at_0914] == 2
    assert series.counts["dead"][at_0914] == 1
    assert series.total == 6
    day = activity.deliveries(engine, NOW, activity.DAY)
    assert day.total == 56 and day.counts["done"][-1] == 5 and day.counts["done"][-2] == 50


def test_jobs_are_counted_by_when_they_finished(engine: Engine) -> None:
    add_jobs(engine, NOW - timedelta(minutes=1), "done", 4)
    add_jobs(engine, NOW - timedelta(minutes=1), "dead", 2)
    add_jobs(engine, NOW - timedelta(days=2), "done", 9)
    series = activity.job_results(engine, NOW, activity.HOUR)
    assert {s: sum(v) for s, v in series.counts.items()} == {"dead": 2, "done": 4}
    assert series.counts["done"][-2] == 4


def test_the_svg_has_a_titled_segment_per_count(engine: Engine) -> None:
    add_deliveries(engine, NOW - timedelta(minutes=2), "done", 7)
    add_deliveries(engine, NOW - timedelta(minutes=2), "failed", 3)
    series = activity.deliveries(engine, NOW, activity.HOUR)
    svg = str(plots.stacked_bars(series, "Deliveries <by outcome>"))
    titles = re.findall(r'<rect class="s-(\w+)"[^>]*><title>([^<]+)</title>', svg)
    assert titles == [("done", "09:28 done: 7"), ("failed", "09:28 failed: 3")]
    assert "&lt;by outcome&gt;" in svg and "<by" not in svg  # the title is escaped
    heights = [float(h) for h in re.findall(r'height="([\d.]+)">', svg)]
    assert heights[0] / heights[1] == 7 / 3


def test_an_empty_window_draws_axes_only(engine: Engine) -> None:
    series = activity.job_results(engine, NOW, activity.DAY)
    svg = str(plots.stacked_bars(series, "Jobs"))
    assert series.total == 0 and "<rect" not in svg and 'class="axis"' in svg
