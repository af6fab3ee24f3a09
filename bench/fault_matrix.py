"""The fault-injection matrix: PostgreSQL cut by a TCP proxy (the server untouched) for a given
time at a given point of a route, and the route's effects counted at a real sink. Every cell
runs on a fresh database, is redelivered (or re-swept) every 0.5 s until complete or out of time,
and prints one row of a Markdown table:

    python -m bench.fault_matrix [--routes sweep,import,warm] [--cuts 0.5,1.5,5,20]
        [--points claim,handler,record,finish] [--emails 300] [--rows 3000] [--targets 60]
        [--ack-deadline 15] [--cell-seconds 90]

lost must be 0 in every cell, duplicates 0 whenever the cut ends before the lease; a cell that
breaks either rule (or whose cut was never made) fails the run (exit status 1). Bounded: each
cell stops after --cell-seconds; servers bind 127.0.0.1 and are stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from bench.fault_routes import POINTS, Counts, ImportRoute, Route, Sizes, SweepRoute, WarmRoute
from bench.support.cuts import Cutter
from bench.support.postgres import PG_ADMIN_DSN, migrated_postgres_database
from bench.support.tcpproxy import TcpProxy
from consumer.db.engine import make_engine
from consumer.errors import Unavailable
from triggers.local import stack

REDELIVERY_SECONDS = 0.5
ALL_POINTS = ("claim", "handler", "record", "finish")


@dataclass(frozen=True)
class Cell:
    route: str
    point: str
    seconds: float


@dataclass(frozen=True)
class Row:
    cell: Cell
    counts: Counts
    cut_length: float
    """0 when the trigger never fired (the cell proves nothing)."""
    lease_seconds: float
    attempts: int
    wall_seconds: float

    @property
    def before_lease(self) -> bool:
        return self.cut_length < self.lease_seconds

    @property
    def ok(self) -> bool:
        no_extra = self.counts.duplicates == 0 or not self.before_lease
        return self.cut_length > 0 and self.counts.lost == 0 and no_extra


def cells(routes: Sequence[str], points: Sequence[str], cuts: Sequence[float]) -> list[Cell]:
    """Every applicable (route, point) for each cut, shortest cuts first."""
    return [
        Cell(route, point, seconds)
        for seconds in cuts
        for route in routes
        for point in points
        if point in POINTS[route]
    ]


def run_cell(cell: Cell, sizes: Sizes, bound: float, gcs_url: str = "") -> Row:
    """One cell on a fresh database behind a fresh proxy."""
    with migrated_postgres_database(PG_ADMIN_DSN, "fault_matrix") as url:
        if "@127.0.0.1:5432/" not in url:
            raise SystemExit(f"the matrix cuts PostgreSQL on 127.0.0.1:5432, not {url}")
        proxy = TcpProxy(5432)
        proxy.start()
        proxied = url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        engine, direct = make_engine(proxied), make_engine(url)
        try:
            route = build(cell.route, proxied, engine, direct, proxy, sizes, gcs_url)
            try:
                return drive(route, proxy, cell, bound)
            finally:
                route.close()
        finally:
            proxy.watch = None
            proxy.stop()
            engine.dispose()
            direct.dispose()


def build(
    name: str, proxied: str, engine: Engine, direct: Engine, proxy: TcpProxy, sizes: Sizes,
    gcs_url: str,
) -> Route:  # fmt: skip
    if name == "sweep":
        return SweepRoute(proxied, direct, proxy, sizes)
    if name == "import":
        return ImportRoute(proxied, engine, direct, proxy, sizes, gcs_url)
    return WarmRoute(proxied, engine, proxy, sizes)


def drive(route: Route, proxy: TcpProxy, cell: Cell, bound: float) -> Row:
    """Arm the cut, then attempt until complete (Pub/Sub redelivers what was not acked; the
    scheduler ticks the sweep again) or out of time; wait for the cut to end before counting."""
    cutter = Cutter(proxy, cell.seconds)
    if cell.point == "claim":
        cutter.cut()
    else:
        route.arm(cell.point, cutter)
    started = time.monotonic()
    deadline, attempts, complete = started + bound, 0, False
    while not complete and time.monotonic() < deadline:
        attempts += 1
        try:
            complete = route.attempt(deadline)
        except (Unavailable, SQLAlchemyError):
            complete = False  # the delivery's 503: redelivered
        if not complete:
            time.sleep(REDELIVERY_SECONDS)
    proxy.watch = None
    if cutter.made:
        cutter.ended.wait(cell.seconds + 5)
    wall = time.monotonic() - started
    return Row(cell, route.counts(), cutter.length, route.lease_seconds, attempts, wall)


@contextmanager
def fake_gcs(needed: bool) -> Iterator[str]:
    """fake-gcs-server (in memory) on a free loopback port when a route needs it."""
    if not needed:
        yield ""
        return
    with tempfile.TemporaryDirectory() as root:
        port = stack.free_port()
        service = stack.start_fake_gcs(port, Path(root) / "data", Path(root) / "gcs.log",
                                       backend="memory")  # fmt: skip
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            service.stop()


HEADER = (
    "| route | point | cut (s) | cut made (s) | lease (s) | ends before lease | effects | "
    "expected | duplicates | lost | deliveries | wall (s) | verdict |"
)


def markdown_row(row: Row) -> str:
    cell, counts = row.cell, row.counts
    verdict = "ok" if row.ok else ("no cut" if row.cut_length == 0 else "FAIL")
    return (
        f"| {cell.route} | {cell.point} | {cell.seconds:g} | {row.cut_length:.2f} | "
        f"{row.lease_seconds:g} | {'yes' if row.before_lease else 'no'} | {counts.effects} | "
        f"{counts.expected} | {counts.duplicates} | {counts.lost} | {row.attempts} | "
        f"{row.wall_seconds:.1f} | {verdict} |"
    )


def legend(routes: Sequence[str], points: Sequence[str]) -> list[str]:
    lines = ["", "How each cut point is hit:"]
    for route in routes:
        lines += [f"- {route} / {p}: {how}" for p, how in POINTS[route].items() if p in points]
    return lines


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser("bench.fault_matrix", description=__doc__, formatter_class=raw)
    parser.add_argument("--routes", default="sweep,import,warm")
    parser.add_argument("--cuts", default="0.5,1.5,5,20")
    parser.add_argument("--points", default="claim,handler,record,finish")
    parser.add_argument("--emails", type=int, default=300)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--targets", type=int, default=60)
    parser.add_argument("--ack-deadline", type=int, default=15)
    parser.add_argument("--cell-seconds", type=float, default=90.0)
    args = parser.parse_args(argv)
    args.routes = [r for r in args.routes.split(",") if r]
    args.points = [p for p in args.points.split(",") if p]
    unknown = (set(args.routes) - set(POINTS)) | (set(args.points) - set(ALL_POINTS))
    if unknown:
        parser.error(f"unknown route or point: {', '.join(sorted(unknown))}")
    args.cuts = [float(c) for c in args.cuts.split(",") if c]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.CRITICAL)
    args = parse(argv)
    sizes = Sizes(args.emails, args.rows, args.targets, args.ack_deadline)
    print(
        f"sizes: {args.emails} emails, {args.rows} CSV rows, {args.targets} warm targets; "
        f"ack deadline {args.ack_deadline} s; each cell bounded to {args.cell_seconds:g} s"
    )
    print()
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    rows = []
    with fake_gcs("import" in args.routes) as gcs_url:
        for cell in cells(args.routes, args.points, args.cuts):
            row = run_cell(cell, sizes, args.cell_seconds, gcs_url)
            rows.append(row)
            print(markdown_row(row), flush=True)
    print("\n".join(legend(args.routes, args.points)))
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
