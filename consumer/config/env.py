"""From ``CONSUMER_*`` variables to the values of each section's fields, with no knowledge of
which sections exist: ``consumer.config.settings`` hands over the built-in ones, and the
composition root (``consumer.service``) the plugins' that the registry collected.

Every variable belongs to exactly one field of one section: ``Settings`` itself, a built-in
section, or a plugin's section. Anything else under ``CONSUMER_`` is an unknown setting, so a
typo cannot silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from consumer.config.fields import PREFIX, Section, settings_of, variables
from consumer.errors import AlreadyRegistered, SettingsError

Owner = str | type[Section]
"""Where a field lives: ``""`` (``Settings`` itself), a built-in section's attribute, or a
plugin section's class."""
Catalog = dict[str, tuple[Owner, dataclasses.Field[Any]]]
"""``CONSUMER_*`` variable -> (owner, field)."""
PLUGIN_PREFIX = re.compile(r"[A-Z][A-Z0-9_]*_")


def catalog(
    owners: Mapping[Owner, type[Section]], plugins: Iterable[type[Section]] = ()
) -> Catalog:
    """Every variable of ``owners`` (owner -> its section class), then of each plugin section
    (owned by its class)."""
    known: Catalog = {}
    for owner, kind in owners.items():
        known.update({variable: (owner, spec) for variable, spec in variables(kind).items()})
    for kind in plugins:
        known.update({variable: (kind, spec) for variable, spec in variables(kind).items()})
    return known


def convert(env: Mapping[str, str], known: Catalog) -> dict[Owner, dict[str, Any]]:
    """Each ``CONSUMER_*`` variable converted by its field's converter, by owner; every problem
    (unknown variables, bad values) at once in one ``SettingsError``."""
    values: dict[Owner, dict[str, Any]] = {}
    problems: list[str] = []
    for key, raw in env.items():
        if not key.startswith(PREFIX):
            continue
        if key not in known:
            problems.append(f"{key}: unknown setting")
            continue
        owner, spec = known[key]
        try:
            values.setdefault(owner, {})[spec.name] = spec.metadata["convert"](raw)
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    if problems:
        raise SettingsError("; ".join(sorted(problems)))
    return values


def plugin_section_problem(kind: Any, builtin: Iterable[str]) -> str | None:
    """Why ``kind`` cannot be a plugin's settings section, or None. Its variables must all
    start with ``CONSUMER_<prefix>``, a prefix no ``builtin`` variable starts with."""
    if not (
        isinstance(kind, type) and issubclass(kind, Section) and dataclasses.is_dataclass(kind)
    ):
        return f"{kind!r} is not a dataclass subclassing consumer.config.fields.Section"
    prefix = f"{PREFIX}{kind.prefix}"
    if not PLUGIN_PREFIX.fullmatch(kind.prefix):
        return (
            f"{kind.__name__}.prefix must be capitals, digits and _ ending in '_', e.g. 'BILLING_'"
        )
    clash = next((name for name in builtin if name.startswith(prefix)), None)
    if clash:
        return f"{kind.__name__}.prefix {kind.prefix!r} is taken by the built-in {clash}"
    stray = [name for name in variables(kind) if not name.startswith(prefix)]
    if stray or not settings_of(kind):
        return f"{kind.__name__}: every setting must be a setting(...) named {prefix}*"
    return None


def check_prefix_free(kind: type[Section], taken: Mapping[str, type[Section]]) -> None:
    """Refuse a plugin section whose prefix overlaps another plugin section's."""
    overlap = [
        other
        for p, other in taken.items()
        if p.startswith(kind.prefix) or kind.prefix.startswith(p)
    ]
    if overlap and overlap != [kind]:
        raise AlreadyRegistered(
            f"settings prefix {kind.prefix!r} overlaps {overlap[0].__name__}'s; "
            "each plugin section needs a prefix of its own"
        )
