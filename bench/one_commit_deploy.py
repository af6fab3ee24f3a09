"""A plugin for ``bench/push_bench.py --one-commit``: the no-op deploy handler of
``bench.noop_deploy`` declared a one-commit handler (``local_effects=True``), so the benchmark
measures a push whose claim and outcome are one transaction against the same push in two
commits."""

from __future__ import annotations

from bench.noop_deploy import noop
from consumer.pipeline.registry import Registry


def register(registry: Registry) -> None:
    registry.deploy(noop, replace=True, local_effects=True)
