"""A test plugin with a settings section of its own (``CONSUMER_BILLING_*``), read by its tick
handler from the context, the way docs/plugins.md shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from consumer.config.fields import Rule, setting
from consumer.config.parse import names, whole
from consumer.config.settings import Section
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import TickEvent


def regions(raw: str) -> frozenset[str]:
    """A converter of this field alone: lower-cased, de-duplicated region names."""
    return frozenset(name.lower() for name in names(raw))


@dataclass(frozen=True, repr=False)
class BillingSettings(Section):
    prefix: ClassVar[str] = "BILLING_"
    api_url: str = setting("https://billing.example.com/v1")
    """Where invoices are sent."""
    batch: int = setting(50, convert=whole, within=(1, 500))
    """Invoices per request."""
    regions: frozenset[str] = setting(frozenset({"eu"}), convert=regions)
    """Regions billed, comma-separated."""
    api_key: str = setting("", secret=True)
    """Key of the billing API."""

    def checks(self) -> list[Rule]:
        return [(self.api_url.startswith("https://"), "CONSUMER_BILLING_API_URL must be https://")]


def register(registry: Registry) -> None:
    registry.settings(BillingSettings)
    registry.tick("billing", period_seconds=3600)(bill)


def bill(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    billing = context.settings.section(BillingSettings)
    return {"url": billing.api_url, "batch": billing.batch, "regions": sorted(billing.regions)}
