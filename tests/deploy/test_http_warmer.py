"""The built-in HTTP warmer against a real local server that counts hits."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.support.deploy_targets import TargetServer, sitemap, sitemap_index
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.deploy.http_warmer import HttpWarmer
from consumer.deploy.report import WarmReport
from consumer.pipeline.context import HandlerContext
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent

EVENT = DeployEvent("web", "v1", message=parse_wrapped(deploy_body("web", "v1"), Limits()))


@pytest.fixture
def local_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'unused.db'}")
    yield engine
    engine.dispose()


def warm(engine: Engine, budget: float = 30.0, **settings: Any) -> WarmReport:
    config = Settings.of(local_mode=True, **settings)
    deadline = time.monotonic() + budget
    context = HandlerContext(config, engine, EVENT.key, attempt=1, deadline=deadline)
    report = HttpWarmer()(context, EVENT)
    assert report is not None
    return report


def test_200_targets_at_concurrency_16_are_each_hit_exactly_once(
    targets: TargetServer, local_engine: Engine
) -> None:
    targets.delay = 0.02
    urls = targets.urls("ok", 200)
    report = warm(local_engine, warm_targets=tuple(urls), warm_concurrency=16)
    assert targets.hits_of(urls) == [1] * 200
    assert (report.ok, len(report.failed), report.not_reached) == (200, 0, ())
    assert 8 <= targets.peak <= 16  # the limit holds, and it is really concurrent
    p50, p95 = report.latency_ms(0.5), report.latency_ms(0.95)
    assert p50 is not None and p95 is not None and 20 <= p50 <= p95


def test_a_target_listed_twice_is_requested_once(
    targets: TargetServer, local_engine: Engine
) -> None:
    url = targets.urls("ok", 1)[0]
    report = warm(local_engine, warm_targets=(url, url, url))
    assert (targets.hits_of([url]), report.ok) == ([1], 1)


def test_slow_and_failing_targets_are_recorded_without_failing_the_run(
    targets: TargetServer, local_engine: Engine
) -> None:
    good, slow = targets.urls("ok", 20), targets.urls("slow", 2)
    failing, missing = targets.urls("fail", 2), targets.urls("missing", 1)
    report = warm(
        local_engine, warm_targets=(*good, *slow, *failing, *missing), warm_timeout_ms=300,
        warm_retries=1, warm_backoff_ms=10, warm_concurrency=8,
    )  # fmt: skip
    assert report.ok == 20 and len(report.failed) == 5
    errors = {result.target: result for result in report.failed}
    assert all("timed out" in errors[url].error for url in slow)
    assert all(errors[url].error == "HTTP 500" and errors[url].attempts == 2 for url in failing)
    assert errors[missing[0]].attempts == 1  # a 404 is not retried
    assert targets.hits_of(failing + missing) == [2, 2, 1]
    assert targets.hits_of(good) == [1] * 20


def test_a_transient_failure_is_retried_after_a_backoff(
    targets: TargetServer, local_engine: Engine
) -> None:
    flaky = targets.urls("flaky", 3)
    started = time.monotonic()
    report = warm(local_engine, warm_targets=tuple(flaky), warm_retries=2, warm_backoff_ms=200)
    assert report.ok == 3 and all(result.attempts == 2 for result in report.results)
    assert time.monotonic() - started >= 0.1  # the jittered delay is at least half the base
    assert targets.hits_of(flaky) == [2, 2, 2]


def test_configured_headers_are_sent(targets: TargetServer, local_engine: Engine) -> None:
    url = targets.urls("ok", 1)[0]
    warm(local_engine, warm_targets=(url,), warm_headers='{"X-Warm": "yes", "Cookie": "a=b"}')
    seen = targets.headers_seen[url.removeprefix(targets.url)]
    assert (seen["X-Warm"], seen["Cookie"]) == ("yes", "a=b")
    assert seen["User-Agent"].startswith("consumer-cache-warmer")


def test_the_time_budget_is_respected_and_what_was_not_reached_is_reported(
    targets: TargetServer, local_engine: Engine
) -> None:
    targets.delay = 0.2
    urls = targets.urls("ok", 40)
    started = time.monotonic()
    report = warm(local_engine, budget=1.5, warm_targets=tuple(urls), warm_concurrency=2)
    assert time.monotonic() - started < 1.5
    assert 0 < report.ok < 40 and report.not_reached
    assert report.ok + len(report.failed) + len(report.not_reached) == 40
    assert set(report.not_reached) == set(urls[-len(report.not_reached) :])
    assert targets.hits_of(list(report.not_reached)) == [0] * len(report.not_reached)


def test_sitemap_index_targets_are_warmed_with_the_listed_ones(
    targets: TargetServer, local_engine: Engine
) -> None:
    pages = targets.urls("ok", 6)
    targets.files["/sitemap.xml"] = sitemap_index([f"{targets.url}/a.xml", f"{targets.url}/b.gz"])
    targets.files["/a.xml"] = sitemap(pages[:3])
    targets.files["/b.gz"] = gzip.compress(sitemap([*pages[3:], pages[0]]))
    report = warm(
        local_engine, warm_sitemap_url=f"{targets.url}/sitemap.xml", warm_targets=(pages[0],)
    )
    assert (report.ok, targets.hits_of(pages)) == (6, [1] * 6)


def test_an_unreadable_sitemap_is_a_failed_target_and_the_rest_still_warm(
    targets: TargetServer, local_engine: Engine
) -> None:
    page = targets.urls("ok", 1)
    report = warm(
        local_engine, warm_sitemap_url=f"{targets.url}/missing/sitemap.xml",
        warm_targets=tuple(page),
    )  # fmt: skip
    assert report.ok == 1 and [r.target for r in report.failed] == [
        f"sitemap {targets.url}/missing/sitemap.xml"
    ]


def test_a_failing_child_sitemap_is_a_failed_target_and_the_other_children_are_warmed(
    targets: TargetServer, local_engine: Engine
) -> None:
    pages = targets.urls("ok", 4)
    children = [f"{targets.url}/a.xml", f"{targets.url}/fail/b.xml", f"{targets.url}/c.xml"]
    targets.files["/sitemap.xml"] = sitemap_index(children)
    targets.files["/a.xml"], targets.files["/c.xml"] = sitemap(pages[:2]), sitemap(pages[2:])
    report = warm(local_engine, warm_sitemap_url=f"{targets.url}/sitemap.xml", warm_retries=0)
    assert (report.ok, targets.hits_of(pages)) == (4, [1] * 4)
    (failure,) = report.failed
    assert failure.target == f"sitemap {children[1]}" and "HTTP 500" in failure.error


def test_max_targets_cuts_the_list_with_a_note(targets: TargetServer, local_engine: Engine) -> None:
    urls = targets.urls("ok", 10)
    report = warm(local_engine, warm_targets=tuple(urls), warm_max_targets=4)
    assert report.ok == 4 and "CONSUMER_WARM_MAX_TARGETS=4" in report.note
    assert sum(targets.hits_of(urls)) == 4


def test_nothing_configured_means_nothing_to_report(local_engine: Engine) -> None:
    context = HandlerContext(Settings(local_mode=True), local_engine, EVENT.key, 1, 1e12)
    assert HttpWarmer()(context, EVENT) is None


def test_an_unusable_url_fails_alone_without_retries(
    targets: TargetServer, local_engine: Engine
) -> None:
    good = targets.urls("ok", 3)
    report = warm(local_engine, warm_targets=("http://127.0.0.1:99999/x", *good), warm_retries=3)
    assert report.ok == 3 and targets.hits_of(good) == [1, 1, 1]
    (failure,) = report.failed
    assert failure.attempts == 1 and "InvalidURL" in failure.error


SECRET_HEADERS = '{"X-Warm-Token": "s3cret"}'


@pytest.fixture
def elsewhere() -> Iterator[TargetServer]:
    """A second server: same host, another port, so another origin."""
    server = TargetServer().start()
    yield server
    server.stop()


def test_a_redirect_to_another_origin_is_not_followed_and_gets_no_headers(
    targets: TargetServer, elsewhere: TargetServer, local_engine: Engine
) -> None:
    foreign = elsewhere.urls("ok", 1)[0]
    targets.redirects["/moved"] = foreign
    report = warm(local_engine, warm_targets=(f"{targets.url}/moved",), warm_headers=SECRET_HEADERS)
    assert elsewhere.hits_of([foreign]) == [0] and not elsewhere.headers_seen
    (failure,) = report.failed
    assert (failure.status, failure.attempts) == (302, 1)
    assert "another origin" in failure.error


def test_a_redirect_within_the_origin_is_followed_with_the_headers(
    targets: TargetServer, local_engine: Engine
) -> None:
    page = targets.urls("ok", 1)[0]
    targets.redirects["/moved"] = page.removeprefix(targets.url)  # a relative Location
    report = warm(local_engine, warm_targets=(f"{targets.url}/moved",), warm_headers=SECRET_HEADERS)
    assert report.ok == 1 and targets.hits_of([page]) == [1]
    assert targets.headers_seen[page.removeprefix(targets.url)]["X-Warm-Token"] == "s3cret"


def test_a_redirect_loop_fails_after_a_bounded_number_of_hops(
    targets: TargetServer, local_engine: Engine
) -> None:
    targets.redirects["/a"], targets.redirects["/b"] = f"{targets.url}/b", f"{targets.url}/a"
    report = warm(local_engine, warm_targets=(f"{targets.url}/a",), warm_retries=3)
    (failure,) = report.failed
    assert "redirect" in failure.error.lower() and failure.attempts == 1
    assert targets.hits["/a"] + targets.hits["/b"] == 6  # the request and five redirects


def test_a_malformed_location_fails_the_target_alone(
    targets: TargetServer, local_engine: Engine
) -> None:
    good = targets.urls("ok", 2)
    targets.redirects["/bad"] = "http://[::1/x"
    report = warm(local_engine, warm_targets=(f"{targets.url}/bad", *good))
    assert report.ok == 2 and [r.target for r in report.failed] == [f"{targets.url}/bad"]
