"""Bounded slices of the jobs-by-epochs benchmarks. The prototype's lays the prototype out beside
the plain table, drives every measurement and prints its last line; and the switch's lock keeps
every key to one row while writers race the switches (what the design rests on). The retirement's
retires an epoch and deletes as many jobs in chunks, and prints the WAL of each. The cost bench
runs the product's enqueue, import move and sweep on both tables (each step asserts its rows).
No timing or WAL figure is asserted (docs/performance.md and docs/retention.md have them)."""

from __future__ import annotations

import re

import pytest

from tests.bench.test_bench_slices import run_bench

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
LAST_LINE = (
    r"jobs epochs: keyed enqueue db cpu (\S+) us vs (\S+) us: (\S+) x; bulk (\S+) vs (\S+) us/row: "
    r"(\S+) x; sweep (\S+) vs (\S+) us/job: (\S+) x; retire WAL (\S+) vs (\S+) B/row; "
    r"hammer duplicates (\d+) with the lock, (\d+) without"
)


def test_the_epochs_bench_prints_its_figures_and_the_lock_keeps_keys_unique(
    postgres_admin: str,
) -> None:
    printed = run_bench(
        "jobs_epochs", "--jobs", "500", "--batch", "5000", "--sweep", "3000", "--rows", "5000",
        "--rounds", "1", "--hammer-seconds", "2",
    )  # fmt: skip
    match = re.fullmatch(LAST_LINE, printed.strip().splitlines()[-1])
    assert match is not None, printed
    figures = [float(group) for group in match.groups()]
    assert not any(figure < 0 for figure in figures), printed  # nan: a run too short to tick
    assert figures[11] == 0, printed  # duplicated keys with the switch's lock


RETIRE_LINE = r"jobs retire: (\S+) bytes WAL/row \((\d+) rows\), chunked delete (\S+) bytes WAL/row"


def test_the_retire_bench_retires_an_epoch_and_prints_both_purges(postgres_admin: str) -> None:
    printed = run_bench("jobs_retire", "--rows", "2000", "--rounds", "1")
    match = re.fullmatch(RETIRE_LINE, printed.strip().splitlines()[-1])
    assert match is not None, printed
    retired, rows, deleted = float(match[1]), int(match[2]), float(match[3])
    assert rows == 2000, printed  # the epoch was dropped whole, every job counted
    assert retired > 0 and deleted > 0, printed


COST_LINE = (
    r"jobs epochs cost: keyed enqueue db (\S+) vs (\S+) us: (\S+) x; imported row (\S+) vs "
    r"(\S+) us: (\S+) x; swept job (\S+) vs (\S+) us: (\S+) x"
)


def test_the_cost_bench_runs_the_products_statements_on_both_tables(postgres_admin: str) -> None:
    printed = run_bench(
        "jobs_epoch_cost", "--jobs", "100", "--batch", "1000", "--sweep", "1000", "--rounds", "1"
    )
    match = re.fullmatch(COST_LINE, printed.strip().splitlines()[-1])
    assert match is not None, printed
    assert not any(float(group) < 0 for group in match.groups()), printed  # nan: too short to tick
