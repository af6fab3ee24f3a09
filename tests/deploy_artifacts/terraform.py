"""The Terraform triggers as data (python-hcl2), with just enough evaluation for the consistency
checks: ``${var.x}``, ``${each.key}``, ``${each.value}`` and ``${each.value.field}`` inside
strings. The google provider
cannot be downloaded here, so ``terraform validate``/``plan`` cannot do this for us."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hcl2

INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


def unquote(value: Any) -> Any:
    """hcl2 keeps the quotes of string literals and of block labels; drop them."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [unquote(item) for item in value]
    return value


@dataclass(frozen=True)
class Module:
    variables: dict[str, dict[str, Any]]
    resources: dict[tuple[str, str], dict[str, Any]]

    @classmethod
    def load(cls, directory: Path) -> Module:
        variables: dict[str, dict[str, Any]] = {}
        resources: dict[tuple[str, str], dict[str, Any]] = {}
        for path in sorted(directory.glob("*.tf")):
            with path.open() as handle:
                parsed = unquote(hcl2.load(handle))
            for block in parsed.get("variable", []):
                variables.update(block)
            for block in parsed.get("resource", []):
                for kind, named in block.items():
                    for name, body in named.items():
                        resources[(kind, name)] = body
        return cls(variables, resources)

    def default(self, name: str) -> Any:
        return self.variables[name].get("default")

    def values(self, tfvars: Path | None = None) -> dict[str, Any]:
        """Variable values: defaults, overridden by a ``.tfvars`` file."""
        values = {name: spec.get("default") for name, spec in self.variables.items()}
        if tfvars is not None:
            with tfvars.open() as handle:
                overrides = unquote(hcl2.load(handle))
            values.update({k: v for k, v in overrides.items() if not k.startswith("__")})
        return values

    def resource(self, kind: str, name: str) -> dict[str, Any]:
        return self.resources[(kind, name)]

    def of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: body for (k, name), body in self.resources.items() if k == kind}


def evaluate(expression: Any, values: dict[str, Any], each: tuple[str, Any] = ("", "")) -> Any:
    """Evaluate a literal, ``${var.x}`` or a string with such interpolations; anything else
    raises, so a test never compares against an expression it did not understand."""
    if not isinstance(expression, str):
        return expression
    whole = INTERPOLATION.fullmatch(expression)
    if whole:
        return _reference(whole.group(1).strip(), values, each)
    return INTERPOLATION.sub(
        lambda m: str(_reference(m.group(1).strip(), values, each)), expression
    )


def _reference(name: str, values: dict[str, Any], each: tuple[str, Any]) -> Any:
    if name.startswith("var."):
        return values[name[len("var.") :]]
    if name == "each.key":
        return each[0]
    if name == "each.value":
        return each[1]
    if name.startswith("each.value.") and isinstance(each[1], dict):
        return each[1][name[len("each.value.") :]]
    raise ValueError(f"cannot evaluate ${{{name}}}")
