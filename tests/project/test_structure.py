"""The house's shape, checked from the code itself: no import circle counting every import
wherever it stands (top of file, inside functions, under ``TYPE_CHECKING``, by a string given to
``import_module``), few modules at the package's root, every package under the layer contract
that ``lint-imports`` enforces (``pyproject.toml``), no module of the package, the benches or the
tests over 300 lines, tests that mirror the packages, and benches and tests that neither lean on
each other the wrong way nor edit ``sys.path``."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "consumer"
BENCH = ROOT / "bench"
TESTS = ROOT / "tests"
MAX_LINES = 300


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


def too_long(paths: Iterable[Path], root: Path = ROOT) -> dict[str, int]:
    """``path -> lines`` of every file over ``MAX_LINES`` lines, relative to ``root``."""
    counted = {str(path.relative_to(root)): len(path.read_text().splitlines()) for path in paths}
    return {path: lines for path, lines in sorted(counted.items()) if lines > MAX_LINES}


def test_no_module_of_the_package_the_benches_or_the_tests_is_over_300_lines() -> None:
    """Test modules too (helpers and conftests included): a long one is split by subject."""
    assert too_long([*PACKAGE.rglob("*.py"), *BENCH.rglob("*.py"), *TESTS.rglob("*.py")]) == {}


def test_the_line_count_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert list(too_long(tmp_path.glob("*.py"), root=tmp_path)) == ["long.py"]


def packages_without_tests(package: Path, tests: Path) -> list[str]:
    """Directories of ``package`` that hold Python code (``migrations`` included) and have no
    ``tests/<name>/``."""
    holding_code = {path.parent.relative_to(package).parts[0] for path in package.glob("*/**/*.py")}
    return sorted(name for name in holding_code if not (tests / name).is_dir())


def test_every_package_has_its_tests_directory() -> None:
    assert packages_without_tests(PACKAGE, TESTS) == []


def test_a_package_without_tests_is_found(tmp_path: Path) -> None:
    (tmp_path / "code" / "alone" / "deeper").mkdir(parents=True)
    (tmp_path / "code" / "alone" / "deeper" / "m.py").write_text("")
    (tmp_path / "tests").mkdir()
    assert packages_without_tests(tmp_path / "code", tmp_path / "tests") == ["alone"]


def imports_from_tests(paths: Iterable[Path]) -> list[str]:
    """Files that import ``tests`` or any module under it."""
    return sorted(
        path.name
        for path in paths
        if any(name.split(".")[0] == "tests" for name in imported(ast.parse(path.read_text())))
    )


def test_the_benches_import_nothing_from_the_tests() -> None:
    """Shared fixtures live in ``bench.support``, which tests import; never the other way."""
    assert imports_from_tests(BENCH.rglob("*.py")) == []


def sys_path_edits(paths: Iterable[Path]) -> list[str]:
    """Files that touch ``sys.path`` (``sys.path.insert``, ``sys.path[:0] = ...``, ``from sys
    import path``): a package run with ``python -m`` needs none."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "sys"
                and any(alias.name == "path" for alias in node.names)
            ):
                found.append(path.name)
                break
    return sorted(found)


def test_no_bench_or_test_edits_sys_path() -> None:
    assert sys_path_edits([*BENCH.rglob("*.py"), *TESTS.rglob("*.py")]) == []


def test_the_checks_find_a_test_import_and_a_sys_path_edit(tmp_path: Path) -> None:
    (tmp_path / "leaning.py").write_text("from tests.conftest import free_port\n")
    (tmp_path / "editing.py").write_text("import sys\nsys.path.insert(0, '.')\n")
    files = sorted(tmp_path.glob("*.py"))
    assert imports_from_tests(files) == ["leaning.py"]
    assert sys_path_edits(files) == ["editing.py"]


def class_style(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def class_aliases(paths: Iterable[Path]) -> list[str]:
    """Module-level ``Name = Other`` where both are class-style names: a second name for one thing
    (constants, ``ALL_CAPS``, may name one another)."""
    found = []
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(target := node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name)
                and class_style(target.id)
                and class_style(node.value.id)
            ):
                found.append(f"{path.name}: {target.id} = {node.value.id}")
    return sorted(found)


def test_no_class_has_a_second_name() -> None:
    paths = [*PACKAGE.rglob("*.py"), *(ROOT / "triggers").rglob("*.py")]
    assert class_aliases(paths) == []


def test_the_alias_finder_finds_an_alias(tmp_path: Path) -> None:
    (tmp_path / "names.py").write_text("MAX = LIMIT\nWarmerRegistry = Warmers\nx = y\n")
    assert class_aliases([tmp_path / "names.py"]) == ["names.py: WarmerRegistry = Warmers"]
