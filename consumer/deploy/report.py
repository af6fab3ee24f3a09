"""What a warmer did: one ``TargetResult`` per target, summed up in a ``WarmReport``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TargetResult:
    """One target (a URL, a cache key...) after its last attempt."""

    target: str
    ok: bool
    seconds: float
    """Latency of the last attempt."""
    attempts: int = 1
    status: int | None = None
    error: str = ""


@dataclass(frozen=True)
class WarmReport:
    """One warmer's run for one release. ``not_reached``: targets the time budget did not cover."""

    warmer: str
    results: tuple[TargetResult, ...] = ()
    not_reached: tuple[str, ...] = ()
    duration_seconds: float = 0.0
    note: str = ""

    @property
    def ok(self) -> int:
        return sum(1 for result in self.results if result.ok)

    @property
    def failed(self) -> tuple[TargetResult, ...]:
        return tuple(result for result in self.results if not result.ok)

    def latency_ms(self, fraction: float) -> float | None:
        """Nearest-rank percentile of the latencies of the targets that answered."""
        return percentile([r.seconds * 1000 for r in self.results if r.ok], fraction)

    def summary(self) -> dict[str, Any]:
        """The JSON the deploy handler returns (and Pub/Sub or CI sees) for this warmer."""
        p50, p95 = self.latency_ms(0.50), self.latency_ms(0.95)
        return {
            "warmer": self.warmer,
            "ok": self.ok,
            "failed": len(self.failed),
            "not_reached": len(self.not_reached),
            "p50_ms": None if p50 is None else round(p50, 1),
            "p95_ms": None if p95 is None else round(p95, 1),
            "duration_ms": round(self.duration_seconds * 1000, 1),
            **({"note": self.note} if self.note else {}),
        }


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest rank: the smallest value with at least ``fraction`` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]
