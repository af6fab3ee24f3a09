"""Which processor handles which upload: rules from configuration, the first match wins.

``CONSUMER_STORAGE_RULES`` is a JSON list, or the path of a file holding one::

    [{"bucket": "uploads", "prefix": "jobs/", "glob": "*.csv", "content_type": "text/*",
      "processor": "import-jobs", "options": {"kind": "email"}}]

Every condition is optional; an empty one matches anything. ``events`` defaults to
``["OBJECT_FINALIZE"]``: deletes, archives and metadata updates are only recorded unless a rule
names them.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consumer.config.import_options import ImportOptions
from consumer.errors import SettingsError
from consumer.wire.events import StorageEventType

FINALIZE_ONLY = frozenset({StorageEventType.OBJECT_FINALIZE})
KEYS = {"name", "bucket", "prefix", "glob", "content_type", "events", "processor", "options"}
TEXT_KEYS = ("name", "bucket", "prefix", "glob", "content_type")


@dataclass(frozen=True)
class Rule:
    """Conditions on an object, and the processor (with its options) that handles a match."""

    processor: str
    name: str = ""
    bucket: str = ""
    prefix: str = ""
    glob: str = ""
    """``fnmatch`` pattern over the whole object name (``*`` also crosses ``/``)."""
    content_type: str = ""
    """``fnmatch`` pattern over the media type, parameters ignored: ``text/csv``, ``text/*``."""
    events: frozenset[StorageEventType] = FINALIZE_ONLY
    options: Mapping[str, Any] = field(default_factory=dict)

    def matches(
        self, event_type: StorageEventType, bucket: str, name: str, content_type: str
    ) -> bool:
        media_type = content_type.split(";", 1)[0].strip().lower()
        return self.matches_name(event_type, bucket, name) and (
            not self.content_type or fnmatch.fnmatchcase(media_type, self.content_type)
        )

    def matches_name(self, event_type: StorageEventType, bucket: str, name: str) -> bool:
        """Every condition but the content type."""
        return (
            event_type in self.events
            and (not self.bucket or bucket == self.bucket)
            and name.startswith(self.prefix)
            and (not self.glob or fnmatch.fnmatchcase(name, self.glob))
        )

    @classmethod
    def from_json(cls, value: Any, position: int) -> Rule:
        where = f"rule {position}"
        if not isinstance(value, dict):
            raise SettingsError(f"{where}: expected a JSON object")
        unknown = sorted(set(value) - KEYS)
        if unknown:
            raise SettingsError(f"{where}: unknown keys {unknown}")
        processor = value.get("processor")
        if not isinstance(processor, str) or not processor:
            raise SettingsError(f"{where}: 'processor' must name a processor")
        texts = {key: _text(value, key, where) for key in TEXT_KEYS}
        texts["content_type"] = texts["content_type"].lower()
        options = value.get("options", {})
        if not isinstance(options, dict):
            raise SettingsError(f"{where}: 'options' must be a JSON object")
        events = _events(value.get("events"), where)
        if processor == "import-jobs":  # plugins' processors are not known yet at load
            _check_import_options(options, where)
        return cls(processor=processor, events=events, options=options, **texts)


@dataclass(frozen=True)
class Rules:
    rules: tuple[Rule, ...] = ()

    def select(
        self, event_type: StorageEventType, bucket: str, name: str, content_type: str
    ) -> Rule | None:
        """The first rule that matches, or ``None``."""
        for rule in self.rules:
            if rule.matches(event_type, bucket, name, content_type):
                return rule
        return None

    def need_content_type(self, event_type: StorageEventType, bucket: str, name: str) -> bool:
        """Whether a rule's choice depends on the content type (which a notification with
        ``payloadFormat`` NONE does not carry: the object's metadata must be read first)."""
        return any(
            rule.content_type and rule.matches_name(event_type, bucket, name) for rule in self.rules
        )

    @classmethod
    def from_json(cls, value: Any) -> Rules:
        if not isinstance(value, list):
            raise SettingsError("expected a JSON list of rules")
        return cls(tuple(Rule.from_json(item, n) for n, item in enumerate(value, 1)))


@functools.lru_cache(maxsize=8)
def load_rules(raw: str) -> Rules:
    """Parse the setting: JSON text, or the path of a JSON file. Empty: no rules."""
    text = raw.strip()
    if not text:
        return Rules()
    if text.startswith("{"):
        raise SettingsError("expected a JSON list of rules, not one object")
    if not text.startswith("["):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"cannot read rules file {raw!r}: {exc}") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"rules are not valid JSON: {exc}") from None
    return Rules.from_json(value)


def _check_import_options(options: Mapping[str, Any], where: str) -> None:
    """A bad option is a start-up error, not a failure of every file (or batch) later."""
    try:
        ImportOptions.parse(options)
    except SettingsError as exc:
        raise SettingsError(f"{where}: {exc}") from None


def problem_with(raw: str) -> str:
    """What is wrong with the setting, or ``""``."""
    try:
        load_rules(raw)
    except SettingsError as exc:
        return str(exc)
    return ""


def _text(value: Mapping[str, Any], key: str, where: str) -> str:
    text = value.get(key, "")
    if not isinstance(text, str):
        raise SettingsError(f"{where}: '{key}' must be a string")
    return text


def _events(value: Any, where: str) -> frozenset[StorageEventType]:
    if value is None:
        return FINALIZE_ONLY
    if not isinstance(value, list) or not value:
        raise SettingsError(f"{where}: 'events' must be a non-empty list")
    try:
        return frozenset(StorageEventType(item) for item in value)
    except ValueError:
        known = ", ".join(item.value for item in StorageEventType)
        raise SettingsError(f"{where}: 'events' may only hold {known}") from None
