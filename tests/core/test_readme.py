"""The README's configuration reference is the one the code renders: docs cannot drift."""

from __future__ import annotations

from pathlib import Path

from consumer.config.doc import BEGIN, END, markdown_table

README = Path(__file__).parents[2] / "README.md"


def test_readme_lists_every_setting_as_the_code_renders_it() -> None:
    text = README.read_text()
    between = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert between == markdown_table(), "run: scripts/render-settings-doc"
