"""Deploy hooks and cache warming (issue 5).

A deploy arrives as a Pub/Sub message (``event=deploy``) or as a signed ``POST /hooks/deploy``;
both become one ``DeployEvent`` keyed by service + release and go through the same inbox, so a
release warms its caches once. Users add warmers with ``warmers_of(registry)``.

The names are loaded on first use, so importing one module of the package (its settings
section, when a ``Settings`` is built) does not pull the warmer and its HTTP client.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumer.deploy.report import TargetResult, WarmReport
    from consumer.deploy.warming import register, warmers_of

_HOMES = {"TargetResult": "report", "WarmReport": "report", "register": "warming",
          "warmers_of": "warming"}  # fmt: skip
__all__ = ["TargetResult", "WarmReport", "register", "warmers_of"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"consumer.deploy.{home}"), name)
