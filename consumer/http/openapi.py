"""Serve the OpenAPI 3 description of the HTTP surface (``openapi.yaml``, package data)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from flask import Response

MEDIA_TYPE = "application/yaml"


@cache
def text() -> str:
    """The description as shipped in the package; read once per process."""
    return resources.files("consumer.http").joinpath("openapi.yaml").read_text(encoding="utf-8")


def view() -> Response:
    return Response(text(), mimetype=MEDIA_TYPE)
