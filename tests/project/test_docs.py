"""The docs cannot drift from the code: the configuration reference is the one the code renders,
the command reference names every command with the options it takes, every relative link and
anchor resolves, and the pages a newcomer reads first name only paths, modules and commands that
exist."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from consumer.cli.main import main
from consumer.config.doc import BEGIN, END, markdown_table
from tests.support import docs
from tests.support.docs import ROOT, check_command

DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
COMMANDS = DOCS / "commands.md"
PAGES = sorted([ROOT / "README.md", *DOCS.glob("*.md")])
NAMING_PAGES = [
    DOCS / name
    for name in (
        "architecture.md",
        "performance.md",
        "configuration.md",
        "commands.md",
        "getting-started.md",
        "jobs-topic.md",
    )
]
"""Pages whose code spans must name existing paths and modules (the others are feature guides
with their own tests)."""
COMMAND_WORD = re.compile(r"[^\s\[\]\\|]+")
OPTION = re.compile(r"^--?[a-z][\w-]*$")


def test_the_configuration_reference_is_the_one_the_code_renders() -> None:
    text = CONFIGURATION.read_text()
    between = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert between == markdown_table(), "run: scripts/render-settings-doc"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    local = [link for link in docs.links(page) if link.local]
    assert [link.target for link in local if not link.file().exists()] == []
    unanchored = [
        link.target
        for link in local
        if link.anchor and link.file().suffix == ".md"
        if link.anchor not in docs.anchors(link.file())
    ]
    assert unanchored == []


@pytest.mark.parametrize("page", NAMING_PAGES, ids=lambda page: page.name)
def test_named_paths_and_modules_exist(page: Path) -> None:
    missing = [path for path in docs.named_paths(page) if not (ROOT / path).exists()]
    unknown = [name for name in docs.named_modules(page) if not docs.resolves(name)]
    assert (missing, unknown) == ([], [])


def test_every_getting_started_command_names_what_exists() -> None:
    commands = list(docs.shell_commands(DOCS / "getting-started.md"))
    problems = {" ".join(words): check_command(words) for words in commands}
    assert commands
    assert {command: why for command, why in problems.items() if why} == {}


def documented_commands() -> list[tuple[str, click.Command, list[str]]]:
    """Each ``consumer ...`` code span of the command reference: its text, the command it names
    and the options it shows."""
    found = []
    for span in docs.code_spans(COMMANDS):
        words = COMMAND_WORD.findall(span)
        if words[0] != "consumer" or len(words) < 2 or words[1].startswith("-"):
            continue
        command, rest = docs.click_command(main, words[1:])
        found.append((span, command, [word for word in rest if OPTION.match(word)]))
    return found


def leaf_commands(group: click.Group) -> list[click.Command]:
    found: list[click.Command] = []
    for command in group.commands.values():
        found += leaf_commands(command) if isinstance(command, click.Group) else [command]
    return found


def test_the_command_reference_names_every_command() -> None:
    named = {id(command) for _, command, _ in documented_commands()}
    missing = [command.name for command in leaf_commands(main) if id(command) not in named]
    assert missing == [], "add them to docs/commands.md"


def test_the_command_reference_shows_only_options_that_exist() -> None:
    wrong = {
        span: docs.unknown_options(command, options)
        for span, command, options in documented_commands()
    }
    assert {span: options for span, options in wrong.items() if options} == {}


def test_the_ways_through_the_code_name_modules_that_exist() -> None:
    """The push's and the job's way (docs/architecture.md §1, §11) are drawn in code blocks as
    ``package/module``: each must be a module of the package."""
    text = (DOCS / "architecture.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", text, flags=re.DOTALL)
    packages = {path.parent.name for path in (ROOT / "consumer").glob("*/__init__.py")}
    named = {
        f"{package}/{module}"
        for block in blocks
        for package, module in re.findall(r"\b([a-z_]+)/([a-z_]+)\b", block)
        if package in packages
    }
    assert len(named) >= 20, sorted(named)
    missing = sorted(name for name in named if not (ROOT / "consumer" / f"{name}.py").exists())
    assert missing == []
