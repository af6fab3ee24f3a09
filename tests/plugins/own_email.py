"""A test plugin that replaces the built-in ``email`` kind the way docs/plugins.md shows, with
a plain function: it declares no producer fields of its own."""

from __future__ import annotations

from typing import Any

from consumer.pipeline.registry import Registry


def send_through_our_provider(context: Any, job: Any) -> None:
    """Would hand the job's payload to another mail provider."""


def register(registry: Registry) -> None:
    registry.job_kind("email", replace=True, record_each=True)(send_through_our_provider)
