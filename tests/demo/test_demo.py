"""``consumer demo`` end to end: real processes, a real SMTP sink, real HTTP, SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from consumer.demo.acts import Options, after
from consumer.demo.processes import pubsub_emulator

pytestmark = pytest.mark.slow


def _row(table: str, label: str) -> list[str]:
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in:\n{table}")


def _number(cell: str) -> int:
    return int(cell.replace(",", "").removeprefix("<= "))


def test_the_table_shows_duplicates_before_and_none_lost_after(
    postgres_admin: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    command = [sys.executable, "-m", "consumer", "demo", "--jobs", "300", "--no-emulator",
               "--database", postgres_admin, "--workdir", str(tmp_path)]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, timeout=400, env=env)
    assert finished.returncode == 0, finished.stderr[-3000:]
    table = finished.stdout
    before_dupes, after_dupes = map(_number, _row(table, "extra copies sent"))
    assert before_dupes > 0, table  # the original bug, reproduced
    assert list(map(_number, _row(table, "lost (never delivered)"))) == [0, 0], table
    assert _row(table, "pods killed mid-sweep") == ["0", "1"], table
    bound = _row(table, "duplicate bound (one per sweep it ran)")[1]
    assert after_dupes <= _number(bound.split(" (")[0]) <= 8, table  # the pod's threads
    assert "s" in _row(table, "time to drain")[1] and "not drained" not in table


@pytest.mark.skipif(pubsub_emulator() is None, reason="Google's Pub/Sub emulator is not installed")
def test_the_after_act_through_the_pubsub_emulator(tmp_path: Path) -> None:
    result = after(Options(jobs=400, emulator=True), tmp_path, lambda _: None)
    assert result.drained, result
    assert result.tally.lost == 0 and result.tally.recipients_reached == 400
    assert result.kills == 1
    assert result.tally.extra_copies <= result.duplicate_bound
    assert all(count > 0 for count in result.per_pod), result.per_pod  # the balancer spread ticks
    assert "emulator" in result.notes[0]
