"""From ``CONSUMER_*`` variables (or named values, in tests) to a composed ``Settings``.

Every variable belongs to exactly one field of one section: ``Settings`` itself, a built-in
section, or a section a plugin declared with ``registry.settings``. Anything else under
``CONSUMER_`` is an unknown setting, so a typo cannot silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from consumer.config.fields import PREFIX, Section, settings_of, variables
from consumer.config.parse import names
from consumer.errors import AlreadyRegistered, SettingsError

if TYPE_CHECKING:
    from consumer.config.settings import Settings

Owner = str | type[Section]
"""Where a field lives: ``""`` (``Settings`` itself), a built-in section's attribute, or a
plugin section's class."""
ENTRY_POINT_GROUP = "consumer.plugins"
"""Where installed packages declare plugins (``consumer.plugins`` loads them)."""
PLUGIN_PREFIX = re.compile(r"[A-Z][A-Z0-9_]*_")


def wants_plugins(env: Mapping[str, str]) -> bool:
    """Whether any plugin is configured (only a plugin may declare a section), checked without
    importing the registry: the common case then costs nothing."""
    return bool(names(env.get("CONSUMER_PLUGINS", ""))) or has_entry_points(tuple(sys.path))


@cache
def has_entry_points(_path: tuple[str, ...]) -> bool:
    """Scanning every installed distribution costs tens of milliseconds: once per ``sys.path``
    (a package installed later changes it, or needs a restart anyway)."""
    return bool(entry_points(group=ENTRY_POINT_GROUP))


def read_env(
    cls: type[Settings],
    env: Mapping[str, str],
    plugins: tuple[type[Section], ...],
    plugin_failure: str | None = None,
) -> Settings:
    """Convert every ``CONSUMER_*`` variable with its field's converter, then compose. A plugin
    that failed to load is named with the problems (its variables are unknown without it)."""
    known = catalog(plugins)
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
        raise SettingsError("; ".join([*sorted(problems), *filter(None, [plugin_failure])]))
    return compose(cls, values, plugins)


def compose(
    cls: type[Settings], values: Mapping[Owner, dict[str, Any]], plugins: Iterable[type[Section]]
) -> Settings:
    from consumer.config.settings import part_classes

    parts: dict[str, Any] = {n: kind(**values.get(n, {})) for n, kind in part_classes().items()}
    extra = {kind: kind(**values.get(kind, {})) for kind in plugins}
    return cls(**values.get("", {}), **parts, extra=extra)


def catalog(plugins: Iterable[type[Section]] = ()) -> dict[str, tuple[Owner, Any]]:
    """``CONSUMER_*`` variable -> (owner, field), built-in sections first."""
    known = dict(builtin_catalog())
    for kind in plugins:
        known.update({name: (kind, spec) for name, spec in variables(kind).items()})
    return known


@cache
def builtin_catalog() -> dict[str, tuple[Owner, Any]]:
    from consumer.config.settings import Settings, part_classes

    known: dict[str, tuple[Owner, Any]] = {v: ("", s) for v, s in variables(Settings).items()}
    for name, kind in part_classes().items():
        known.update({variable: (name, spec) for variable, spec in variables(kind).items()})
    return known


@cache
def flat_index() -> dict[str, tuple[str, str]]:
    """A built-in setting's variable without ``CONSUMER_``, lowercased -> (owner, field)."""
    return {
        variable[len(PREFIX) :].lower(): (str(owner), spec.name)
        for variable, (owner, spec) in builtin_catalog().items()
    }


def changed(settings: Settings, sections: Iterable[Section], values: Mapping[str, Any]) -> Settings:
    """``Settings.with_values``: whole sections, then values by field or variable name."""
    from consumer.config.settings import part_classes

    own = {spec.name for spec in dataclasses.fields(settings)}
    top: dict[str, Any] = {"extra": dict(settings.extra)}
    for value in sections:
        name = next((n for n, kind in part_classes().items() if type(value) is kind), None)
        if name is None:
            top["extra"][type(value)] = value
        else:
            top[name] = value
    per_part: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if name in own:
            top[name] = value
        elif name in flat_index():
            owner, attribute = flat_index()[name]
            per_part.setdefault(owner, {})[attribute] = value
        else:
            raise TypeError(f"no setting named {name!r}")
    for owner, changes in per_part.items():
        top[owner] = dataclasses.replace(top.get(owner, getattr(settings, owner)), **changes)
    return dataclasses.replace(settings, **top)


def plugin_section_problem(kind: Any) -> str | None:
    """Why ``kind`` cannot be a plugin's settings section, or None. Its variables must all
    start with ``CONSUMER_<prefix>``, a prefix no built-in variable starts with."""
    if not (
        isinstance(kind, type) and issubclass(kind, Section) and dataclasses.is_dataclass(kind)
    ):
        return f"{kind!r} is not a dataclass subclassing consumer.config.settings.Section"
    prefix = f"{PREFIX}{kind.prefix}"
    if not PLUGIN_PREFIX.fullmatch(kind.prefix):
        return (
            f"{kind.__name__}.prefix must be capitals, digits and _ ending in '_', e.g. 'BILLING_'"
        )
    clash = next((name for name in builtin_catalog() if name.startswith(prefix)), None)
    if clash:
        return f"{kind.__name__}.prefix {kind.prefix!r} is taken by the built-in {clash}"
    stray = [name for name in variables(kind) if not name.startswith(prefix)]
    if stray or not settings_of(kind):
        return f"{kind.__name__}: every setting must be a setting(...) named {prefix}*"
    return None


def check_plugin_section(kind: Any, taken: Mapping[str, type[Section]]) -> None:
    """``registry.settings``: refuse a section that is malformed or whose prefix is taken."""
    problem = plugin_section_problem(kind)
    if problem:
        raise SettingsError(problem)
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
