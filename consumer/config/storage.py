"""The file-processing rules (docs/storage.md), parsed at start so a bad rule set stops the
service instead of the first upload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, setting
from consumer.config.storage_rules import problem_with


@dataclass(frozen=True, repr=False)
class StorageSettings(Section):
    """``CONSUMER_STORAGE_*``."""

    prefix: ClassVar[str] = "STORAGE_"
    rules: str = setting("")
    """File-processing rules: a JSON list, or the path of a JSON file (see docs/storage.md)."""

    def checks(self) -> list[Rule]:
        problem = problem_with(self.rules)
        return [(not problem, f"CONSUMER_STORAGE_RULES: {problem}")]
