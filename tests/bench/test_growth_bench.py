"""A bounded slice of ``bench/growth_bench.py`` (same code): an empty inbox and 200,000 finished
rows, one short run each, then the purge under a small steady load; and ``--purge`` alone. It
proves the benchmark runs, purges the day past retention and prints its ratios and its last line;
it asserts no timing (this machine's figures are in docs/capacity.md)."""

from __future__ import annotations

import re

import pytest

from bench import growth_bench

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SLICE = ["--rows", "0,200000", "--seconds", "1", "--repeat", "1", "--rate", "100",
         "--steady", "3", "--purge-seconds", "3"]  # fmt: skip


def test_the_growth_bench_prints_the_ratio_of_a_full_inbox_and_of_the_purge(
    postgres_admin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    growth_bench.main(SLICE)
    printed = capsys.readouterr().out
    assert "ratio 200,000 rows/empty " in printed, printed
    assert "ratio p99 during/before " in printed, printed
    assert "; over the purge's span alone " in printed, printed
    [full] = [line.split() for line in printed.splitlines() if line.strip().startswith("200,000 ")]
    assert float(full[-1]) > 400, f"bytes per row of a full inbox: {full}"  # its message alone
    purged = next(line for line in printed.splitlines() if line.startswith("purge under"))
    assert " 0 rows in" not in purged, "the purge found none of the rows past retention"
    assert re.fullmatch(PURGE_LINE, printed.rstrip("\n").splitlines()[-1]), printed[-2000:]


PURGE_LINE = (
    r"purge: -?\d+ bytes WAL/row, \d+\.\d us db cpu/row; "
    r"push p99 during purge \d+\.\d\d x \(at 100/s\)"
)


def test_the_purge_alone_drains_the_day_past_retention_and_prints_its_cost_per_row(
    postgres_admin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    growth_bench.main(
        ["--purge", "--rows", "50000", "--repeat", "1", "--rate", "100", "--steady", "3",
         "--purge-seconds", "20"]
    )  # fmt: skip
    printed = capsys.readouterr().out
    purged = next(line for line in printed.splitlines() if line.startswith("purge under"))
    assert " 0 rows in" not in purged and "(unfinished)" not in purged, purged
    assert "ratio 50,000 rows/empty" not in printed, "--purge ran the growth rounds"
    assert re.fullmatch(PURGE_LINE, printed.rstrip("\n").splitlines()[-1]), printed[-2000:]
