"""Bounded slices of the push, sweep, import and enqueue benchmarks, run as a user runs them: one
short run of each server or mode. They prove the benchmarks start their servers, drive them, drain
every job (the sweep bench checks) and print every ratio they are read for; they assert no timing
(the quiet machine's figures are in docs/performance.md). ``test_growth_bench.py``
does the same for the growth benchmark."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[2]


SLICE_OLD_ROWS = "1000"
"""Finished jobs in each earlier epoch of a slice's jobs table (``bench.support.aged_epochs``)."""
AGED = f"earlier epochs of {SLICE_OLD_ROWS} finished keyed jobs each"


def run_bench(module: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "BENCH_OLD_ROWS": SLICE_OLD_ROWS},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def ratio(printed: str, label: str) -> float:
    """The ratio printed after ``label`` (``ratio consumer/floor 0.55x``)."""
    match = re.search(re.escape(label) + r" (\d+\.\d+)x", printed)
    assert match is not None, f"{label!r} not printed:\n{printed}"
    return float(match[1])


def test_the_push_bench_prints_the_consumer_against_its_floors(postgres_admin: str) -> None:
    printed = run_bench("push_bench", "--seconds", "1", "--repeat", "1", "--one-commit")
    for label in (
        "ratio consumer/floor", "consumer/2-writes", "consumer/2w-wsgi", "ratio 1-commit/floor",
    ):  # fmt: skip
        assert ratio(printed, label) > 0, printed
    for server in ("consumer", "2w-wsgi"):
        assert re.search(server + r"\s+\d+ req/s .* non-2xx 0 ", printed), printed
    figures = last_line(printed, PUSH_CPU)
    assert len(figures) == 5 and all(figure > 0 for figure in figures), printed


PUSH_CPU = (
    r"push cpu: consumer (\S+) us/push \(worker (\S+), db (\S+)\) vs two-writes (\S+) us: (\S+) x"
)
SWEEP_CPU = (
    r"sweep cpu: 1 sweeper (\S+) us/job vs direct (\S+) us: (\S+) x; "
    r"4 sweepers (\S+) vs (\S+): (\S+) x"
)


def last_line(printed: str, pattern: str) -> list[float]:
    """The figures of the bench's last line, which must match ``pattern`` whole (``n/a``
    read as NaN)."""
    match = re.fullmatch(pattern, printed.rstrip("\n").splitlines()[-1])
    assert match is not None, f"last line is not {pattern!r}:\n{printed[-2000:]}"
    return [float("nan") if figure == "n/a" else float(figure) for figure in match.groups()]


def sweep_ratios(printed: str, header: str) -> dict[int, float]:
    """The ratio column under ``header`` in the sweep bench's table, by number of sweepers."""
    found = {}
    for line in printed[printed.index(header) :].splitlines()[1:]:
        match = re.match(r"\s*(\d+)\s+(\d+\.\d+)", line)
        if match is None:
            break
        found[int(match[1])] = float(match[2])
    return found


SWEEP_SLICE = ["--jobs", "3000", "--sweepers", "1,2", "--repeat", "1"]


def test_the_sweep_bench_prints_the_ratio_to_direct_sql(postgres_admin: str) -> None:
    printed = run_bench("sweep_bench", *SWEEP_SLICE, "--skip-procrastinate")
    assert AGED in printed, printed
    found = sweep_ratios(printed, "consumer/direct")
    assert set(found) == {1, 2}, printed
    assert all(ratio > 0 for ratio in found.values()), printed
    figures = last_line(printed, SWEEP_CPU)
    assert all(figure > 0 for figure in figures[:3]), printed
    assert all(math.isnan(figure) for figure in figures[3:]), printed  # no 4 sweepers in the slice


def test_the_sweep_bench_prints_what_a_cap_costs(postgres_admin: str) -> None:
    printed = run_bench("sweep_bench", *SWEEP_SLICE, "--cap", "100000")
    found = sweep_ratios(printed, "capped/consumer")
    assert set(found) == {1, 2}, printed
    assert all(ratio > 0 for ratio in found.values()), printed
    assert last_line(printed, SWEEP_CPU), printed  # all n/a: --cap runs no direct SQL


def test_the_storage_bench_prints_the_import_against_both_copy_floors(postgres_admin: str) -> None:
    printed = run_bench("storage_bench", "--rows", "2000", "--repeat", "1")
    assert AGED in printed, printed
    lines = printed.splitlines()
    for mode in (
        "same-trip floor: upload -> committed", "handler in process",
        "e2e: upload -> jobs committed",
    ):  # fmt: skip
        line = next((line for line in lines if line.startswith(mode)), None)
        assert line is not None, printed
        assert float(line.split()[-1]) > 0 and float(line.split()[-2]) > 0, line
    assert re.search(r"^against the same-trip floor, " + IMPORT_LINE + "$", printed, re.M), printed
    parts = next(line for line in lines if line.startswith("seconds: e2e upload "))
    assert "; same-trip floor upload " in parts and " rows " in parts, parts
    figures = last_line(printed, IMPORT_LINE)
    assert len(figures) == 5 and all(figure > 0 for figure in figures), printed


IMPORT_LINE = (
    r"import: e2e (\S+) rows/s vs COPY (\S+) rows/s: (\S+) x; cpu (\S+) us/row vs (\S+) us/row"
)


ENQUEUE_LINE = (
    r"enqueue: many (\S+) jobs/s \(cpu (\S+) us/job\) vs COPY (\S+); "
    r"one (\S+) us/job vs direct INSERT (\S+) us: (\S+) x \(a transaction each: (\S+) us\)"
)


def test_the_enqueue_bench_prints_both_enqueues_against_direct_sql(postgres_admin: str) -> None:
    printed = run_bench("enqueue_bench", "--jobs", "2000", "--one", "100", "--repeat", "1")
    assert AGED in printed, printed
    figures = last_line(printed, ENQUEUE_LINE)  # each run checked its jobs, once, in order
    assert len(figures) == 7 and all(figure > 0 for figure in figures), printed


PEERS_LINE = (
    r"peers: jobs/s 1 worker consumer (\S+) graphile-worker (\S+) pg-boss (\S+) "
    r"procrastinate (\S+) pgqueuer (\S+); cpu us/job consumer (\S+) graphile-worker (\S+) "
    r"pg-boss (\S+) procrastinate (\S+) pgqueuer (\S+); batch enqueue jobs/s consumer (\S+) "
    r"graphile-worker (\S+) pg-boss (\S+) procrastinate (\S+) pgqueuer (\S+)"
)


@pytest.mark.skipif(shutil.which("npm") is None, reason="the Node.js peers need npm")
def test_the_peers_bench_runs_the_consumer_beside_the_node_peers(
    postgres_admin: str, tmp_path: Path
) -> None:
    """Only the peers that install in seconds (npm); each worker checked every job ran once."""
    peers = "consumer,graphile-worker,pg-boss"
    args = ["--jobs", "200", "--repeat", "1", "--peers", peers, "--scratch", str(tmp_path)]
    figures = last_line(run_bench("peers", *args), PEERS_LINE)
    ran = [figures[i] for group in (0, 5, 10) for i in (group, group + 1, group + 2)]
    assert all(figure > 0 for figure in ran), figures
    assert all(math.isnan(figures[i]) for group in (0, 5, 10) for i in (group + 3, group + 4))
