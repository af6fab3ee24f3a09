"""What every page and action of the dashboard reads: the composed service, the access check and
the clock, kept on the app (``current_app.extensions["dashboard"]``)."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.dashboard.access import Access
from consumer.pipeline.registry import Registry
from consumer.service import Service
from consumer.wire.timeutil import Clock


@dataclass(frozen=True)
class Context:
    service: Service
    access: Access
    clock: Clock

    @property
    def settings(self) -> Settings:
        return self.service.settings

    @property
    def engine(self) -> Engine:
        return self.service.engine

    @property
    def registry(self) -> Registry:
        return self.service.registry


def context() -> Context:
    found: Context = current_app.extensions["dashboard"]
    return found
