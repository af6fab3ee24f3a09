"""The README is a front page that works from a clean clone: short, every link to a file that
exists, every command naming a script or a ``consumer`` command that exists, and a package map
that lists every package of ``consumer/``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support import docs
from tests.support.docs import ROOT, check_command

README = ROOT / "README.md"
MAX_LINES = 200
MAP_ROW = re.compile(r"^\| `(consumer/[\w./]+)` \|", re.MULTILINE)


def test_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"{len(lines)} lines: move the detail under docs/"


@pytest.mark.parametrize("name", ["scripts/dev", "scripts/test"])
def test_the_two_commands_lead_the_readme(name: str) -> None:
    commands = [words[0] for words in docs.shell_commands(README)]
    assert name in commands
    assert os.access(ROOT / name, os.X_OK)


def test_every_readme_command_names_what_exists() -> None:
    commands = list(docs.shell_commands(README))
    assert commands, "the README shows no command"
    problems = {" ".join(words): check_command(words) for words in commands}
    assert {command: why for command, why in problems.items() if why} == {}


def test_the_command_check_refuses_what_does_not_exist() -> None:
    assert check_command(["scripts/deploy-everything"]).startswith("no script")
    assert "no command 'frobnicate'" in check_command(["consumer", "frobnicate"])
    assert "--colour" in check_command(["consumer", "jobs", "list", "--colour", "red"])
    assert "CONSUMER_TYPO" in check_command(["CONSUMER_TYPO=1", "scripts/dev"])
    assert check_command(["make", "install"])
    assert check_command(["CONSUMER_WARM_TARGETS=http://x", "scripts/dev"]) == ""


def test_every_path_and_module_the_readme_names_exists() -> None:
    missing = [path for path in docs.named_paths(README) if not (ROOT / path).exists()]
    unknown = [name for name in docs.named_modules(README) if not docs.resolves(name)]
    assert (missing, unknown) == ([], [])


def test_the_package_map_lists_every_package_of_consumer() -> None:
    listed = MAP_ROW.findall(README.read_text())
    packages = sorted(
        f"consumer/{entry.name}/"
        for entry in (ROOT / "consumer").iterdir()
        if entry.is_dir() and not entry.name.startswith(("_", "."))
    )
    assert sorted(path for path in listed if path.endswith("/")) == packages
    assert [path for path in listed if not (ROOT / path).exists()] == []
    assert len(listed) == len(set(listed)), "one line per package"


def test_the_readme_leads_to_every_doc() -> None:
    linked = {link.file() for link in docs.links(README) if link.local}
    pages = {page.resolve() for page in (ROOT / "docs").glob("*.md")}
    assert sorted(page.name for page in pages - linked) == [], "add it to Read on"


def test_the_readme_carries_no_settings_table() -> None:
    """The generated reference lives in docs/configuration.md, not in the front page."""
    assert "<!-- settings:begin -->" not in README.read_text()


def test_every_link_of_the_readme_works(readme_links: list[docs.Link]) -> None:
    broken = [link.target for link in readme_links if not link.file().exists()]
    assert broken == []
    wrong = [
        link.target
        for link in readme_links
        if link.anchor and link.anchor not in docs.anchors(link.file())
    ]
    assert wrong == []


@pytest.fixture
def readme_links() -> list[docs.Link]:
    found = [link for link in docs.links(README) if link.local]
    assert found, "the README links to no doc"
    return found


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[gone](missing.md) [here](#title) [there](#nowhere)\n")
    found = docs.links(page)
    assert [link.file().exists() for link in found] == [False, True, True]
    assert [link.anchor in docs.anchors(page) for link in found[1:]] == [True, False]
