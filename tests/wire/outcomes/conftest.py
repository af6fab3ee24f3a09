"""The outcome-table tests run the effects plugin (``tests.plugins.effects``), and the app they
push to serves it."""

from __future__ import annotations

import pytest

from consumer.config.settings import Settings


@pytest.fixture
def effect_settings(settings: Settings) -> Settings:
    return Settings.of(
        database_url=settings.database_url, local_mode=True, plugins=("tests.plugins.effects",),
        max_attempts=3,
    )  # fmt: skip


@pytest.fixture
def app_settings(effect_settings: Settings) -> Settings:
    return effect_settings
