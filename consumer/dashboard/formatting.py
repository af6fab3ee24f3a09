"""How times, ages, JSON and job limits are shown, in the browser and in the terminal alike."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from consumer.config.flow import JobLimit
from consumer.wire.message import PushMessage


def when(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


def age(seconds: float | None) -> str:
    """``3d 4h``, ``2h 5m``, ``4m 10s`` or ``12s``: two units at most."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def limit(shown: JobLimit) -> str:
    """``cap 4, rate 50/1s``, one of them, or ``no limit``."""
    parts = [f"{name} {value}" for name, value in shown.describe().items() if value is not None]
    return ", ".join(parts) or "no limit"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def message_data(stored: Any) -> str:
    """The data of a stored message as a person reads it: JSON pretty-printed, else text, else
    a note on the binary size."""
    try:
        data = PushMessage.from_json(stored).data
    except (ValueError, TypeError, KeyError):
        return "(the stored message cannot be read)"
    if not data:
        return "(no data)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(data)} bytes of binary data)"
    try:
        return pretty(json.loads(text))
    except ValueError:
        return text


FILTERS = {
    "when": when, "age": age, "limit": limit, "pretty": pretty, "message_data": message_data,
}  # fmt: skip
