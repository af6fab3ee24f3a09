"""The house's shape, checked from the code itself: no import circle counting every import
wherever it stands (top of file, inside functions, under ``TYPE_CHECKING``, by a string given to
``import_module``), few modules at the package's root, and every package under the layer contract
that ``lint-imports`` enforces (``pyproject.toml``)."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "consumer"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.relative_to(PACKAGE).parts
    }


def imported(tree: ast.AST) -> Iterator[str]:
    """Every module name an import statement or an ``import_module("...")`` call names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield str(node.args[0].value).partition(":")[0]


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = {target for target in imported(ast.parse(path.read_text())) if target in known}
        edges[name] = targets - {name}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_counting_every_import() -> None:
    assert circles(graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_at_most_ten_modules_at_the_root_of_the_package() -> None:
    at_root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(at_root) <= 10, at_root


def test_every_package_stands_on_a_layer_of_the_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    present = {
        path.parent.name if path.name == "__init__.py" else path.stem
        for path in PACKAGE.glob("*/__init__.py")
    } | {path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__")}
    assert present - {"migrations"} <= named, sorted(present - named)


def test_no_lazy_attributes_or_type_checking_imports() -> None:
    """Both hid import circles; the public API is imported eagerly in ``consumer/__init__``."""
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "__getattr__" not in defined, name
        assert "TYPE_CHECKING" not in path.read_text(), name
