"""Reading the project's Markdown the way GitHub renders it (links, heading anchors, fenced
command blocks, the paths, modules and commands a page names), and saying whether each of them
exists, so the docs are checked from a clean clone."""

from __future__ import annotations

import importlib
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click

from consumer.cli.main import main
from consumer.config.doc import markdown_table

ROOT = Path(__file__).parents[2]
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
BLOCK = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SHELL = frozenset({"sh", "bash", "shell", "console"})
REPO_PATH = re.compile(r"^(?:\.ci|bench|consumer|docs|k8s|scripts|tests|triggers)/[\w./-]*$")
MODULE = re.compile(r"^consumer(?:\.\w+)+$")
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
ENSURE_ENV = ROOT / "scripts" / "ensure-env"


@dataclass(frozen=True)
class Link:
    page: Path
    target: str

    @property
    def local(self) -> bool:
        return not re.match(r"^[a-z][a-z0-9+.-]*:", self.target)

    def file(self) -> Path:
        path = self.target.split("#", 1)[0]
        return (self.page.parent / path).resolve() if path else self.page

    @property
    def anchor(self) -> str:
        return self.target.split("#", 1)[1] if "#" in self.target else ""


def prose(text: str) -> str:
    """The page without its fenced blocks: their ``#`` lines and brackets are code."""
    return FENCE.sub("", text)


def links(page: Path) -> list[Link]:
    found = LINK.findall(prose(page.read_text()))
    return [Link(page, inline or image) for inline, image in found]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: code marks and punctuation dropped, lower case, each space
    a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated one gets ``-1``, ``-2``... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(prose(page.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def code_spans(page: Path) -> list[str]:
    return CODE_SPAN.findall(prose(page.read_text()))


def named_paths(page: Path) -> list[str]:
    """Repository paths a page names in code spans (``consumer/wire/outcomes.py``)."""
    return [span for span in code_spans(page) if REPO_PATH.match(span)]


def named_modules(page: Path) -> list[str]:
    """Dotted names under ``consumer`` a page names in code spans (``consumer.db.pinned``)."""
    return [span for span in code_spans(page) if MODULE.match(span)]


def resolves(dotted: str) -> bool:
    """A module, or an attribute of one (``consumer.config.settings.Settings``)."""
    first, *rest = dotted.split(".")
    target: object = importlib.import_module(first)
    for at, name in enumerate(rest, start=2):
        if hasattr(target, name):
            target = getattr(target, name)
            continue
        try:
            target = importlib.import_module(".".join(dotted.split(".")[:at]))
        except ModuleNotFoundError:
            return False
    return True


def shell_commands(page: Path) -> Iterator[list[str]]:
    """Each command of a page's shell blocks as words: comments and output lines (``# ...``)
    dropped, continued lines and quotes that span lines joined."""
    for language, body in BLOCK.findall(page.read_text()):
        if language not in SHELL:
            continue
        pending = ""
        for line in body.replace("\\\n", " ").splitlines():
            pending += line + "\n"
            try:
                words = shlex.split(pending, comments=True)
            except ValueError:  # a quote still open: the command goes on
                continue
            pending = ""
            if words:
                yield words


def without_assignments(words: list[str]) -> tuple[list[str], list[str]]:
    """(the ``NAME=value`` prefixes' names, the command after them)."""
    names = []
    while words and ASSIGNMENT.match(words[0]):
        names.append(words[0].split("=", 1)[0])
        words = words[1:]
    return names, words


def click_command(group: click.Group, words: list[str]) -> tuple[click.Command, list[str]]:
    """The subcommand ``words`` name, and the words left for it; ``LookupError`` if none."""
    command: click.Command = group
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        found = command.commands.get(words[0])
        if found is None:
            raise LookupError(f"no command {words[0]!r} under {command.name!r}")
        command, words = found, words[1:]
    if isinstance(command, click.Group):
        raise LookupError(f"{command.name!r} needs a subcommand")
    return command, words


def options_of(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)}


def unknown_options(command: click.Command, words: list[str]) -> list[str]:
    """The ``--options`` in ``words`` that ``command`` does not take (``--x=1`` as ``--x``)."""
    known = options_of(command) | {"--help"}
    asked = [word.split("=", 1)[0] for word in words if word.startswith("-") and word != "-"]
    return [option for option in asked if option not in known]


def known_variables() -> set[str]:
    """Every ``CONSUMER_*`` variable of the built-in settings, as the reference renders them."""
    return set(re.findall(r"`(CONSUMER_\w+)`", markdown_table()))


def check_command(words: list[str]) -> str:
    """Why a documented command would not work from a clean clone ("" when it would): it must
    run a script of the repository or the ``consumer`` command with options it takes, and set
    only settings that exist."""
    variables, command = without_assignments(words)
    unknown = sorted(set(variables) - known_variables())
    if unknown:
        return f"unknown settings {unknown}"
    if not command:
        return ""  # the assignments alone: a variable set for the commands that follow
    program, arguments = command[0], command[1:]
    if program in {".", "source"}:
        return _check_activate(arguments)
    if program.startswith(("scripts/", ".ci/")):
        path = ROOT / program
        return "" if path.is_file() and os.access(path, os.X_OK) else f"no script {program}"
    if program == "consumer":
        try:
            found, rest = click_command(main, arguments)
        except LookupError as error:
            return str(error)
        wrong = unknown_options(found, rest)
        return f"{found.name} takes no {wrong}" if wrong else ""
    return f"{program!r} is not a script of the repository nor the consumer command"


def _check_activate(arguments: list[str]) -> str:
    """Only the virtualenv the two commands make (``scripts/ensure-env``) may be sourced."""
    if arguments != [".venv/bin/activate"]:
        return f"sources {arguments}, not .venv/bin/activate"
    return "" if "-m venv .venv" in ENSURE_ENV.read_text() else "nothing makes .venv"
