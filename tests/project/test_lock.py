"""requirements.lock (what the image installs, hash-checked) matches pyproject.toml's runtime
dependencies: each is pinned within its specifier, every pin has hashes, and re-running the
compile (keeping the pins) gives the same set."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def pins(text: str) -> dict[str, str]:
    """name -> version of each requirement line (markers and hashes aside)."""
    found = {}
    for line in text.splitlines():
        match = PIN.match(line)
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(spec) for spec in project["dependencies"]]


def test_every_runtime_dependency_is_pinned_within_its_specifier() -> None:
    locked = pins(LOCK.read_text())
    problems = []
    for requirement in runtime_requirements():
        version = locked.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{requirement.name} is not in the lock")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement.name}=={version} is outside {requirement.specifier}")
    assert problems == [], "run scripts/lock"


def test_extras_of_runtime_dependencies_are_locked_too() -> None:
    """psycopg[binary] needs psycopg-binary in the image."""
    assert "psycopg-binary" in pins(LOCK.read_text())


def test_every_pin_carries_hashes() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text())
    unhashed = [e.split()[0] for e in entries if PIN.match(e) and "--hash=sha256:" not in e]
    assert unhashed == []


def test_the_lock_holds_no_test_or_bench_tools() -> None:
    locked = pins(LOCK.read_text())
    assert not {"pytest", "hypothesis", "ruff", "mypy", "uv", "procrastinate"} & locked.keys()


@pytest.mark.slow
def test_recompiling_gives_the_same_pins(tmp_path: Path) -> None:
    """What ``scripts/lock`` would write now, keeping the current pins: offline from uv's cache
    when it can, else from the index; skipped (with the reason) only if neither answers."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    output = tmp_path / "requirements.lock"
    shutil.copy(LOCK, output)  # the existing pins are uv's preferences
    command = [
        uv, "pip", "compile", str(ROOT / "pyproject.toml"), "--universal", "--python-version",
        "3.11", "--generate-hashes", "--quiet", "--output-file", str(output),
    ]  # fmt: skip
    result = subprocess.run([*command, "--offline"], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.skip(f"uv cannot resolve here (no cache, no index): {result.stderr[-300:]}")
    assert pins(output.read_text()) == pins(LOCK.read_text()), "run scripts/lock"
