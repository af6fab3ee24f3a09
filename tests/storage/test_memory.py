"""100 MB files are processed with memory that does not grow with the file: peak RSS growth
under 50 MB, measured in a separate process (``memory_probe``) so nothing else is counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from triggers.local import stack

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
MIB = 1024 * 1024
SIZE = 100 * MIB
LIMIT_MIB = 50


def write_csv(path: Path, size: int) -> int:
    """About ``size`` bytes of valid email rows (~4 KB each), written in chunks."""
    filler = "x" * 4000
    rows = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("to,subject,text\n")
        while out.tell() < size:
            out.write(
                "".join(f"u{rows + n}@example.com,Row {rows + n},{filler}\n" for n in range(100))
            )
            rows += 100
    return rows


def write_garbage(path: Path, size: int) -> None:
    """Binary noise without a single newline: one 100 MB "line"."""
    block = bytes(byte for byte in range(256) if byte != 0x0A) * 4096
    with path.open("wb") as out:
        while out.tell() < size:
            out.write(block)


def upload(gcs_url: str, bucket: str, name: str, path: Path) -> str:
    blob = stack.storage_client(gcs_url).bucket(bucket).blob(name)
    blob.upload_from_filename(str(path), content_type="text/csv")
    return f"{name}#{blob.generation}"


def test_100_mb_files_in_bounded_memory(gcs_url: str, postgres_url: str, tmp_path: Path) -> None:
    bucket = "memory"
    stack.storage_client(gcs_url).create_bucket(bucket)
    rows = write_csv(tmp_path / "big.csv", SIZE)
    write_garbage(tmp_path / "garbage.csv", SIZE)
    (tmp_path / "warm.csv").write_text("to,subject,text\na@example.com,hi,there\n")
    objects = [upload(gcs_url, bucket, name, tmp_path / name) for name in
               ("warm.csv", "big.csv", "garbage.csv")]  # fmt: skip
    command = [sys.executable, "-m", "tests.storage.memory_probe", gcs_url, postgres_url, bucket,
               *objects]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    big, garbage, control = (
        dict[str, Any](item) for item in json.loads(done.stdout.splitlines()[-1])
    )
    print(f"\n100 MB memory probe:\n{big}\n{garbage}\n{control}")
    assert control["peak_growth_mib"] >= 60, control  # the instrument does see memory held

    assert (big["status"], big["rows_accepted"], big["rows_rejected"]) == ("done", rows, 0)
    assert garbage["status"] == "rejected"
    assert big["peak_growth_mib"] < LIMIT_MIB, big
    assert garbage["peak_growth_mib"] < LIMIT_MIB, garbage
