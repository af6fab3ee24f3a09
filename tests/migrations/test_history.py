"""The migration history read from ``consumer/migrations/versions`` (docs/architecture.md draws
it): one head, every revision on the way to it, the head the highest-numbered revision, each
file named for its revision, and a schema that goes down to nothing and back up on SQLite."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.script import Script, ScriptDirectory
from sqlalchemy import inspect

from consumer.db.engine import make_engine
from consumer.db.migrate import alembic_config, head_revisions, upgrade
from tests.db.test_migrations import describe


def scripts() -> dict[str, Script]:
    directory = ScriptDirectory.from_config(alembic_config(""))
    return {script.revision: script for script in directory.walk_revisions()}


def number(revision: str) -> int:
    """``0013_notify_trigger`` -> 13: the number a revision is filed under."""
    return int(revision.partition("_")[0])


def below(revision: str, known: dict[str, Script]) -> set[str]:
    """Every revision ``revision`` stands on, itself included (all its parents, transitively)."""
    seen: set[str] = set()
    waiting = [revision]
    while waiting:
        current = waiting.pop()
        if current not in seen:
            seen.add(current)
            down = known[current].down_revision
            waiting.extend((down,) if isinstance(down, str) else down or ())
    return seen


def test_the_history_has_one_head() -> None:
    assert len(head_revisions()) == 1, sorted(head_revisions())


def test_every_revision_is_on_the_way_to_the_head() -> None:
    known = scripts()
    [head] = head_revisions()
    assert below(head, known) == set(known), sorted(set(known) - below(head, known))


def test_the_head_is_the_highest_numbered_revision_and_the_only_one_of_its_number() -> None:
    [head] = head_revisions()
    numbers = sorted(number(revision) for revision in scripts())
    assert number(head) == numbers[-1]
    assert numbers.count(number(head)) == 1


def test_each_file_is_named_for_its_revision() -> None:
    for revision, script in scripts().items():
        assert Path(script.path).stem == revision


def test_the_schema_goes_down_to_nothing_and_back_up_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'round_trip.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        migrated = describe(engine)
        command.downgrade(alembic_config(url), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(url)
        assert describe(engine) == migrated
    finally:
        engine.dispose()
