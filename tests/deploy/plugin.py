"""A user plugin that adds cache warmers through ``warmers_of(registry)``, as a user would.

``calls`` records each run so a test can count them; ``search`` only applies to ``web``.
"""

from __future__ import annotations

from consumer import TargetResult, WarmReport
from consumer.deploy.warming import warmers_of
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent

calls: list[tuple[str, str]] = []


def register(registry: Registry) -> None:
    warmers = warmers_of(registry)

    @warmers.warmer("search", services={"web"})
    def warm_search(context: HandlerContext, event: DeployEvent) -> WarmReport:
        calls.append(("search", event.key))
        results = tuple(TargetResult(f"index-{n}", n != 2, 0.001 * (n + 1)) for n in range(4))
        return WarmReport("search", results)

    @warmers.warmer("broken")
    def warm_broken(context: HandlerContext, event: DeployEvent) -> WarmReport:
        calls.append(("broken", event.key))
        raise RuntimeError("cache cluster is down")

    @warmers.warmer("idle")
    def warm_idle(context: HandlerContext, event: DeployEvent) -> None:
        calls.append(("idle", event.key))
