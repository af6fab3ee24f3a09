"""A bounded slice of ``bench/inbox_claim.py``: it builds its three databases (one table at
``0014_inbox_placed``, the partitioned inbox with past weeks made), claims and finishes on each
and prints its last line; no timing is asserted (the figures are in docs/retention.md)."""

from __future__ import annotations

import pytest

from tests.bench.test_bench_slices import last_line, run_bench

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
NUMBER = r"(\d+\.\d+)"
CLAIM_LINE = (
    rf"inbox claim\+finish db cpu: table {NUMBER} us, function {NUMBER} us, partitioned "
    rf"{NUMBER} us \((\d+) partitions\): {NUMBER} x"
)


def test_the_claim_bench_prints_the_partitioned_claim_beside_the_one_table_claim(
    postgres_admin: str,
) -> None:
    printed = run_bench("inbox_claim", "--pairs", "200", "--rounds", "1", "--past-weeks", "2")
    table, function, partitioned, partitions, ratio = last_line(printed, CLAIM_LINE)
    assert partitions == 8  # two past weeks, this one, four ahead, the default
    assert table >= 0 and function >= 0 and partitioned >= 0 and ratio >= 0
    for mode in ("table", "function", "partitioned", "via parent"):
        assert any(line.startswith(mode) for line in printed.splitlines()), printed
