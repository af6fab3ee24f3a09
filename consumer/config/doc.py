"""The configuration reference (docs/configuration.md, ``consumer settings``), rendered from the
settings sections themselves so the docs cannot drift: one table per section, each field's
variable, default and the docstring written under it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
from collections.abc import Iterable
from typing import Any

from consumer.config.fields import settings_of, variable_of
from consumer.config.settings import Settings, part_classes

BEGIN = "<!-- settings:begin -->"
END = "<!-- settings:end -->"


def field_docs(section: type[Any]) -> dict[str, str]:
    """Attribute docstrings (a string literal right under a field) by field name."""
    tree = ast.parse(inspect.getsource(section))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for current, following in itertools.pairwise(body):
        documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        if (
            documented
            and isinstance(current, ast.AnnAssign)
            and isinstance(current.target, ast.Name)
        ):
            docs[current.target.id] = " ".join(str(following.value.value).split())
    return docs


def markdown_table(plugin_sections: Iterable[type[Any]] = ()) -> str:
    """Every section under its own heading (``Settings``'s own fields first, as "core"), then
    each of ``plugin_sections`` (read with ``context.settings.section(TheirClass)``)."""
    parts: list[tuple[str, str, type[Any]]] = [("core", "settings", Settings)]
    parts += [(name, f"settings.{name}", kind) for name, kind in part_classes().items()]
    parts += [
        (f"plugin {kind.__name__}", f"settings.section({kind.__name__})", kind)
        for kind in plugin_sections
    ]
    return "\n\n".join(section_table(*part) for part in parts)


def section_table(name: str, attribute: str, section: type[Any]) -> str:
    """One section: a heading naming where code reads it and its class, then its variables."""
    docs = field_docs(section)
    where = f"`{attribute}`, `{section.__module__}.{section.__name__}`"
    rows = [f"### {name} ({where})", "", "| variable | default | meaning |", "|---|---|---|"]
    for spec in settings_of(section):
        meaning = docs.get(spec.name, "").replace("|", "\\|")
        rows.append(f"| `{variable_of(section, spec)}` | `{_default(spec)}` | {meaning} |")
    return "\n".join(rows)


def _default(spec: dataclasses.Field[Any]) -> str:
    if spec.default is not dataclasses.MISSING:
        value = spec.default
    elif spec.default_factory is not dataclasses.MISSING:
        value = spec.default_factory()
    else:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    if isinstance(value, dict):
        return ",".join(f"{key}={item}" for key, item in value.items())
    return str(value)
