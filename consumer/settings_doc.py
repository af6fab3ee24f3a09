"""The configuration reference, rendered from ``Settings`` itself so the README cannot drift:
each field's variable, default and the docstring written under it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
from typing import Any

from consumer.settings import PREFIX, Settings

BEGIN = "<!-- settings:begin -->"
END = "<!-- settings:end -->"


def field_docs() -> dict[str, str]:
    """Attribute docstrings (a string literal right under a field) by field name."""
    tree = ast.parse(inspect.getsource(Settings))
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


def markdown_table() -> str:
    docs = field_docs()
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for spec in dataclasses.fields(Settings):
        default = _default(spec)
        meaning = docs.get(spec.name, "").replace("|", "\\|")
        rows.append(f"| `{PREFIX}{spec.name.upper()}` | `{default}` | {meaning} |")
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
