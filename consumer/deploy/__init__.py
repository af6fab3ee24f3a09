"""Deploy hooks and cache warming (issue 5).

A deploy arrives as a Pub/Sub message (``event=deploy``) or as a signed ``POST /hooks/deploy``;
both become one ``DeployEvent`` keyed by service + release and go through the same inbox, so a
release warms its caches once. Users add warmers with ``warmers_of(registry)``.
"""

from __future__ import annotations

from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.warming import register, warmers_of

__all__ = ["TargetResult", "WarmReport", "register", "warmers_of"]
