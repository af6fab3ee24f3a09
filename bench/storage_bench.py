"""Benchmark a CSV import on PostgreSQL against the COPY floors (not a test).

Modes, each on a fresh migrated database, medians of ``--repeat`` runs, measured in the same run:
  floor    in memory: direct psycopg, no service: the same rows (keys of the import's form,
           payload JSON) prepared beforehand, ``COPY``-ed into a temporary stage, then one
           ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` into the migrated ``jobs`` table,
           one transaction.
  trip     the same-trip floor: the same upload to fake-gcs-server -> OBJECT_FINALIZE
           notification -> Pub/Sub emulator push subscription -> a minimal app under gunicorn
           (2 workers, ``bench/import_floor_app.py``) that downloads the object, turns its CSV
           rows into the floor's rows, ``COPY``-es them and moves them with the floor's
           statements, commits and records its finish; timed from the upload call to that
           recorded finish.
  handler  the OBJECT_FINALIZE notification through the dispatcher in this process (no Pub/Sub,
           no HTTP): download, checksum, parse, validate, enqueue, record.
  e2e      the same trip to the service under gunicorn (2 workers) -> ``import-jobs``; timed
           from the upload call to ``processed_files.finished_at``.
The headline is e2e beside the in-memory floor, the strictest one: no upload, no push, no
download, no parsing, so what e2e spends on the trip counts against it (a fixed 0.07-0.12 s and
about 0.45 us a row of upload). The same-trip floor makes the trip too, but parses the whole
file before its one insert, where the import writes a batch while it reads the next: it is a
reference, slower than the import, not a lower bound. CPU per row is read from ``/proc`` (user
plus system time), steadier than rates on a shared machine; each side counts the processes that
did its rows' work, from its clock's start to its end:
  floor    this process (``process_time``: all its threads, only the timed part; preparing the
           rows comes before) and its one backend.
  trip,    the gunicorn worker that handled the push (the one that spent the most CPU; all its
  e2e      threads: the push, the download, reading, validating, writing, the lease heartbeat)
           and the backends connected to that worker (matched by their client's TCP port, read
           when the file is done), from before the upload (both workers booted) until the
           poller sees the file finished.
           Not counted: the other worker, every other backend (the other worker's, a NOTIFY
           listener's), the bench's own polling connection, the emulators; a line before the
           last prints each side's parts, and what was left out. A backend that connected and
           closed within the run is missed (the pool keeps the import's connections).
Another line before the last breaks the seconds of the trips into their parts (upload, the
notification, the push, the work, the record; ``bench.support.import_trip``), medians of each
part. The line before the last sets e2e beside the same-trip floor; the last line beside the
in-memory floor (``import: e2e ... vs COPY ...``), medians of the runs.

    python -m bench.storage_bench [--rows 100000] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench.import_floor_app import FLOOR_STATEMENTS
from bench.support.aged_epochs import AGE_LINE
from bench.support.cpu import cpu_seconds, spent
from bench.support.import_cpu import E2E, Floor, cpu_line, import_line
from bench.support.import_trip import (
    FLOOR_APP,
    PROJECT,
    TOPIC,
    floor_landed,
    fresh_database,
    imported,
    parts_line,
    trip,
)
from bench.support.postgres import conninfo_of
from bench.support.storage import Harness, email_csv
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.storage.handler import StorageHandler
from consumer.storage.reader import ObjectStore
from triggers.local import stack

BUCKET = "bench"
RULES = json.dumps([{"bucket": BUCKET, "processor": "import-jobs"}])
APP = "consumer.http.wsgi:app()"


def bench_floor(rows: int) -> Floor:
    """The set-based floor: COPY into a stage, one INSERT ... SELECT, commit."""
    lines = email_csv(rows).decode().splitlines()
    header = lines[0].split(",")
    # The keys the import makes, ``bucket/object#generation:line``: their length is part of
    # what the unique index costs (short made-up keys made the floor about 12% faster).
    prefix = f"{BUCKET}/handler-{uuid.uuid4().hex}.csv#{time.time_ns() // 1000}:"
    staged = [(f"{prefix}{n}", json.dumps(dict(zip(header, line.split(","), strict=True))))
              for n, line in enumerate(lines[1:], 2)]  # fmt: skip
    create, copy_in, move = FLOOR_STATEMENTS
    with fresh_database() as url, psycopg.connect(conninfo_of(url)) as connection:
        backend = [connection.info.backend_pid]
        db_cpu, cpu = cpu_seconds(backend), time.process_time()
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(create)
            with cursor.copy(copy_in) as copy:
                for row in staged:
                    copy.write_row(row)
            cursor.execute(move)
            assert cursor.rowcount == rows, cursor.rowcount
        connection.commit()
        seconds = time.perf_counter() - started
        cpu, db = time.process_time() - cpu, spent(db_cpu, cpu_seconds(backend))
    return Floor(seconds, cpu, db)


def bench_handler(rows: int, gcs_url: str, profiler: Any = None) -> float:
    """Seconds of one notification through the dispatcher in this process (under
    ``profiler``, a ``cProfile.Profile``, when given)."""
    with fresh_database() as url:
        settings = Settings.of(database_url=url, local_mode=True, storage_rules=RULES)
        engine = make_engine(url)
        handler = StorageHandler(ObjectStore(lambda: stack.storage_client(gcs_url)))
        harness = Harness(gcs_url, settings, engine, handler, BUCKET)
        name = f"handler-{uuid.uuid4().hex}.csv"
        generation = harness.upload(name, email_csv(rows))
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        outcome = harness.notify(name, generation, content_type="text/csv")
        seconds = time.perf_counter() - started
        if profiler is not None:
            profiler.disable()
        assert outcome.details.get("rows_accepted") == rows, outcome.details
        engine.dispose()
    return seconds


def bench_e2e(rows: int, emulators: tuple[str, str], app: str = APP, **env: str) -> E2E:
    """One file through the emulators and the service under gunicorn."""
    return trip(email_csv(rows), BUCKET, emulators, app, imported(rows), RULES, **env)


def bench_trip_floor(rows: int, emulators: tuple[str, str]) -> E2E:
    """The same file, the same trip, to the same-trip floor (``bench/import_floor_app.py``)."""
    return trip(email_csv(rows), BUCKET, emulators, FLOOR_APP, floor_landed(rows), RULES)


def profile(rows: int, emulators: tuple[str, str]) -> None:
    """One import in process and one through gunicorn, each under cProfile (the request's
    thread), printed side by side: where the gunicorn worker's extra time goes."""
    import cProfile
    import pstats

    sort = os.environ.get("PROFILE_SORT", "tottime")
    profiler = cProfile.Profile()
    seconds = bench_handler(rows, emulators[1], profiler)
    print(f"== in process: {seconds:.2f} s")
    pstats.Stats(profiler).sort_stats(sort).print_stats(25)
    with tempfile.TemporaryDirectory() as directory:
        run = bench_e2e(rows, emulators, "bench.profiled_app:app()", BENCH_PROFILE_DIR=directory)
        print(f"== gunicorn: upload -> finished {run.seconds:.2f} s, handler {run.handler:.2f} s")
        dumps = sorted(Path(directory).glob("*.prof"), key=lambda path: path.stat().st_size)
        if not dumps:
            raise SystemExit("the gunicorn workers wrote no profile (bench/profiled_app.py)")
        pstats.Stats(str(dumps[-1])).sort_stats(sort).print_stats(25)


@contextmanager
def emulators(root: Path) -> Iterator[tuple[str, str]]:
    if reason := stack.missing():
        raise SystemExit(f"cannot run the e2e mode: {reason}")
    pubsub_port, gcs_port = stack.free_port(), stack.free_port()
    pubsub = stack.start_pubsub(pubsub_port, root / "pubsub.log", PROJECT)
    host = f"127.0.0.1:{pubsub_port}"
    try:
        stack.ensure_topic(host, PROJECT, TOPIC)
        gcs = stack.start_fake_gcs(gcs_port, root / "gcs", root / "gcs.log", host, PROJECT, TOPIC)
        try:
            stack.ensure_bucket(f"http://127.0.0.1:{gcs_port}", BUCKET)
            yield host, f"http://127.0.0.1:{gcs_port}"
        finally:
            gcs.stop()
    finally:
        pubsub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile both paths instead")
    args = parser.parse_args()
    rows = args.rows
    floor: list[Floor] = []
    handler: list[float] = []
    trips: list[E2E] = []
    e2e: list[E2E] = []
    with tempfile.TemporaryDirectory() as tmp, emulators(Path(tmp)) as both:
        if args.profile:
            return profile(rows, both)
        for _ in range(args.repeat):  # interleaved, so load on the machine hits every mode
            floor.append(bench_floor(rows))
            trips.append(bench_trip_floor(rows, both))
            handler.append(bench_handler(rows, both[1]))
            e2e.append(bench_e2e(rows, both))
    memory = rows / statistics.median(run.seconds for run in floor)
    same_trip = rows / statistics.median(run.seconds for run in trips)
    print(f"{rows} rows, PostgreSQL, median of {args.repeat} runs; {AGE_LINE}")
    print(f"{'mode':<40}{'seconds':>8}{'rows/s':>10}{'vs COPY':>9}{'vs trip':>9}")
    for label, runs in (
        ("floor: COPY stage + INSERT ... SELECT", [run.seconds for run in floor]),
        ("same-trip floor: upload -> committed", [run.seconds for run in trips]),
        ("handler in process", handler),
        ("e2e: upload -> jobs committed", [run.seconds for run in e2e]),
        ("  of which the handler, in gunicorn", [run.handler for run in e2e]),
    ):
        rate = rows / statistics.median(runs)
        print(f"{label:<40}{rows / rate:>8.2f}{rate:>10.0f}{rate / memory:>9.2f}"
              f"{rate / same_trip:>9.2f}")  # fmt: skip
    print(cpu_line(rows, floor, trips, e2e))
    print(parts_line({"e2e": e2e, "same-trip floor": trips}))
    print(f"against the same-trip floor, {import_line(rows, trips, e2e)}")
    print(import_line(rows, floor, e2e))


if __name__ == "__main__":
    main()
