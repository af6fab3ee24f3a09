"""Run in a separate process by ``test_memory``: process object generations through the real
dispatcher and print, as JSON, how much the process's peak RSS grew while doing so.

    python -m tests.storage.memory_probe GCS_URL DATABASE_URL BUCKET WARMUP OBJECT[#GEN]...

The warm-up file loads every library and fills every cache first, so the growth measured is what
the big file itself costs. The peak resident set (``VmHWM``) is reset before each file; its growth
over the RSS at the start is the most memory the processing held at any moment.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.storage.handler import StorageHandler
from consumer.storage.reader import ObjectStore
from tests.storage.conftest import Harness
from triggers.local import stack

CONTROL_MIB = 64


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def start_window() -> float:
    """Reset the peak to the current RSS (Linux ``clear_refs`` 5) and return the current RSS.
    ``ru_maxrss`` is no use here: exec keeps the parent's (pytest's) peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    return max(_status_mib("VmRSS"), _status_mib("VmHWM"))


def peak_mib() -> float:
    return _status_mib("VmHWM")


@dataclass
class Measured:
    name: str
    status: str
    rows_accepted: int
    rows_rejected: int
    seconds: float
    peak_growth_mib: float


def measure(harness: Harness, name: str, generation: int) -> Measured:
    before, started = start_window(), time.monotonic()
    outcome = harness.notify(name, generation)
    seconds, growth = time.monotonic() - started, peak_mib() - before
    details = outcome.details
    return Measured(
        name, str(details.get("status", outcome.kind.value)), int(details.get("rows_accepted", 0)),
        int(details.get("rows_rejected", 0)), round(seconds, 2), round(growth, 1),
    )  # fmt: skip


def main(argv: list[str]) -> None:
    gcs_url, database_url, bucket, warmup, *objects = argv
    rules = json.dumps([{"bucket": bucket, "processor": "import-jobs"}])
    # A budget large enough for a 100 MB file in one delivery (the maximum ack deadline).
    settings = Settings.of(
        database_url=database_url, local_mode=True, storage_rules=rules,
        ack_deadline_seconds=600, safety_margin_seconds=10,
    )  # fmt: skip
    engine = make_engine(database_url)
    handler = StorageHandler(ObjectStore(lambda: stack.storage_client(gcs_url)))
    harness = Harness(gcs_url, settings, engine, handler, bucket)
    warm_name, warm_generation = warmup.rsplit("#", 1)
    measure(harness, warm_name, int(warm_generation))
    results = [vars(measure(harness, *_object(item))) for item in objects]
    results.append(vars(control(CONTROL_MIB)))
    print(json.dumps(results))


def _object(item: str) -> tuple[str, int]:
    name, generation = item.rsplit("#", 1)
    return name, int(generation)


def control(mib: int) -> Measured:
    """The instrument's check: holding ``mib`` MiB must show as that much growth."""
    before, started = start_window(), time.monotonic()
    held = bytearray(mib * 1024 * 1024)
    held[::4096] = b"x" * len(held[::4096])  # touch every page
    growth = peak_mib() - before
    return Measured("control", "held", 0, 0, round(time.monotonic() - started, 2), round(growth, 1))


if __name__ == "__main__":
    main(sys.argv[1:])
