"""A bounded slice of ``bench/sweep_bench.py``, run as a user runs it: a few thousand no-op jobs,
one run of each mode, the plain comparison with direct SQL and the cap's comparison. It proves the
benchmark runs, drains every job in every mode (the bench checks) and prints its ratios; it asserts
no timing (the quiet machine's figures are in the README's Performance table)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]
SLICE = ["--jobs", "3000", "--sweepers", "1,2", "--repeat", "1"]


def run_bench(*extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "bench/sweep_bench.py", *SLICE, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def ratios(printed: str, header: str) -> dict[int, float]:
    """The ratio column under ``header``, by number of sweepers."""
    table = printed[printed.index(header) :].splitlines()[1:]
    found = {}
    for line in table:
        match = re.match(r"\s*(\d+)\s+(\d+\.\d+)", line)
        if match is None:
            break
        found[int(match[1])] = float(match[2])
    return found


def test_the_sweep_bench_prints_the_ratio_to_direct_sql(postgres_admin: str) -> None:
    printed = run_bench("--skip-procrastinate")
    found = ratios(printed, "consumer/direct")
    assert set(found) == {1, 2}, printed
    assert all(ratio > 0 for ratio in found.values()), printed


def test_the_sweep_bench_prints_what_a_cap_costs(postgres_admin: str) -> None:
    printed = run_bench("--cap", "100000")
    found = ratios(printed, "capped/consumer")
    assert set(found) == {1, 2}, printed
    assert all(ratio > 0 for ratio in found.values()), printed
