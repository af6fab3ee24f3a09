"""Bounded slices of ``bench/inbox_claim.py`` (it builds its databases: the floor's table and one
table at ``0014_inbox_placed``, the partitioned inbox with past weeks made, claims and finishes on
each and prints its last line) and of ``bench/inbox_locks.py``; no timing is asserted (the figures
are in docs/retention.md and docs/performance.md)."""

from __future__ import annotations

import re

import pytest

from tests.bench.test_bench_slices import last_line, run_bench

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
NUMBER = r"(\d+\.\d+)"
LOCK_LINE = (
    r"(unanalyzed|analyzed) +(claim|finish): +(\d+) relation locks "
    r"\((\d+) fast-path, (\d+) shared\)"
)
CLAIM_LINE = (
    rf"inbox claim\+finish db cpu: floor {NUMBER} us, table {NUMBER} us, function {NUMBER} us, "
    rf"partitioned {NUMBER} us \((\d+) partitions\): {NUMBER} x"
)


def test_the_claim_bench_prints_the_partitioned_claim_beside_the_one_table_claim(
    postgres_admin: str,
) -> None:
    printed = run_bench("inbox_claim", "--pairs", "200", "--rounds", "1", "--past-weeks", "2")
    floor, table, function, partitioned, partitions, ratio = last_line(printed, CLAIM_LINE)
    assert partitions == 8  # two past weeks, this one, four ahead, the default
    assert min(floor, table, function, partitioned, ratio) >= 0
    for mode in ("floor", "table", "function", "partitioned", "via parent"):
        assert any(line.startswith(mode) for line in printed.splitlines()), printed


def test_the_lock_bench_counts_what_a_claim_and_a_finish_hold(postgres_admin: str) -> None:
    printed = run_bench("inbox_locks", "--past-weeks", "2")
    assert printed.splitlines()[0] == "8 partitions", printed
    counts = re.findall(LOCK_LINE, printed)
    assert [(state, statement) for state, statement, *_ in counts] == [
        ("unanalyzed", "claim"), ("unanalyzed", "finish"),
        ("analyzed", "claim"), ("analyzed", "finish"),
    ], printed  # fmt: skip
    for _, _, total, fast, shared in counts:
        assert int(total) == int(fast) + int(shared) > 0
