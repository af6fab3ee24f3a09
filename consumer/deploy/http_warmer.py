"""The built-in warmer: GET every configured URL (and every sitemap URL) once per release.

Workers take targets from one queue; a worker stops taking when the budget cannot cover another
request, and what is left in the queue is reported as not reached. Slow and failing targets are
recorded, never fail the run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import requests

from consumer.deploy.http_fetch import HttpPolicy, fetch
from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.sitemap import SitemapError, sitemap_urls
from consumer.outbound.budget import MIN_REQUEST_SECONDS, Budget
from consumer.outbound.deadline import deadline_session
from consumer.pipeline.context import HandlerContext
from consumer.wire.events import DeployEvent


class HttpWarmer:
    """Configured by ``CONSUMER_WARM_*``; does nothing (returns ``None``) when no target is set."""

    def __call__(self, context: HandlerContext, event: DeployEvent) -> WarmReport | None:
        settings = context.settings
        if not (settings.warming.targets or settings.warming.sitemap_url):
            return None
        started = time.monotonic()
        policy, budget = HttpPolicy.from_settings(settings), Budget(context.remaining)
        problems: list[TargetResult] = []
        targets = list(settings.warming.targets)
        if settings.warming.sitemap_url:
            targets += _from_sitemap(settings.warming.sitemap_url, policy, budget, problems)
        targets, cut = _capped(_unique(targets), policy.max_targets)
        results, not_reached = warm_all(targets, policy, budget)
        note = f"target list cut at CONSUMER_WARM_MAX_TARGETS={policy.max_targets}" if cut else ""
        return WarmReport(
            "http", tuple(problems + results), tuple(not_reached), time.monotonic() - started, note
        )


def warm_all(
    targets: Sequence[str], policy: HttpPolicy, budget: Budget
) -> tuple[list[TargetResult], list[str]]:
    """Warm ``targets`` with at most ``policy.concurrency`` requests in flight; return the
    results and the targets the budget did not reach."""
    pending, lock = deque(targets), threading.Lock()
    results: list[TargetResult] = []

    def take() -> str | None:
        with lock:
            if pending and budget.allows(MIN_REQUEST_SECONDS):
                return pending.popleft()
            return None

    def work() -> None:
        with deadline_session() as session:
            while (url := take()) is not None:
                results.append(_fetch_one(session, url, policy, budget))

    workers = min(policy.concurrency, len(targets))
    if workers:
        with ThreadPoolExecutor(workers, thread_name_prefix="warm") as pool:
            for future in [pool.submit(work) for _ in range(workers)]:
                future.result()
    return results, list(pending)


def _fetch_one(
    session: requests.Session, url: str, policy: HttpPolicy, budget: Budget
) -> TargetResult:
    """One target; even an unexpected error stays this target's failure, not the run's."""
    started = time.monotonic()
    try:
        return fetch(session, url, policy, budget)[0]
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        return TargetResult(url, False, time.monotonic() - started, error=error)


def _from_sitemap(
    url: str, policy: HttpPolicy, budget: Budget, problems: list[TargetResult]
) -> list[str]:
    """The sitemap's URLs; a sitemap (or a child of an index) that cannot be read is recorded as
    a failed target, and the URLs of the children that could be read are kept."""
    started = time.monotonic()

    def failed(location: str, error: SitemapError) -> None:
        elapsed = time.monotonic() - started
        problems.append(TargetResult(f"sitemap {location}", False, elapsed, error=str(error)))

    with deadline_session() as session:

        def get(location: str) -> bytes:
            result, body = fetch(session, location, policy, budget, keep=True)
            if not result.ok:
                raise SitemapError(f"{location}: {result.error}")
            return body

        try:
            return sitemap_urls(url, get, policy.max_targets + 1, on_child_error=failed)
        except SitemapError as exc:
            failed(url, exc)
            return []


def _unique(urls: Iterable[str]) -> list[str]:
    """Each target once per run, in first-seen order."""
    return list(dict.fromkeys(urls))


def _capped(urls: list[str], limit: int) -> tuple[list[str], int]:
    return urls[:limit], max(0, len(urls) - limit)
