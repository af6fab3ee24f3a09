"""A plugin for ``bench/push_bench.py``: a deploy handler that does nothing, so the benchmark
measures the push path (parse, classify, claim, finish), not cache warming."""

from __future__ import annotations

from typing import Any

from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent


def noop(context: HandlerContext, event: DeployEvent) -> dict[str, Any]:
    return {"release": event.release}


def register(registry: Registry) -> None:
    registry.deploy(noop, replace=True)
