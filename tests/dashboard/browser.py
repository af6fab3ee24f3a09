"""Headless Chromium from the system (Debian's ``chromium``), driven by Playwright's client.

Browsers cannot be downloaded on CI machines, so Playwright's own builds are never used:
``scripts/ensure-browser`` installs the Debian package and this launches it by path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("TESTS_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def require_chromium() -> str:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: scripts/ensure-browser installs it")
        pytest.skip(f"{CHROMIUM} is missing (run scripts/ensure-browser)")
    return CHROMIUM


@contextmanager
def chromium_page(profile: Path) -> Iterator[Any]:
    """A page of a fresh headless Chromium whose profile lives in ``profile`` (a new directory)."""
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
