"""Bytes -> numbered text lines, in memory bounded by the longest allowed line.

A line over the limit is read through and reported, never held whole (binary garbage may have no
newline for 100 MB); a line that is not UTF-8, or holds a NUL byte, is reported by number instead
of failing the file. Each line carries the byte offset after it, so a run can resume mid-file.
``on_progress`` is called every ``PACE_LINES`` lines and every ``SKIP_CHUNK_BYTES`` of an
over-long line, whether or not the lines become records: a file of blank lines still beats the
lease and checks the time budget.

A run of empty lines (``\n`` or ``\r\n`` only) is read a buffer at a time and yielded as one
blank ``Line`` numbered after its last line: a gigabyte of newlines (a few kilobytes of gzip)
costs a few thousand steps instead of a billion, and still gives a resume point inside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple

MAX_LINE_BYTES = 1 << 20
SKIP_CHUNK_BYTES = 1 << 16
BOM = b"\xef\xbb\xbf"
PACE_LINES = 1000
BLANK = (b"\n", b"\r\n")
NEWLINES = b"\n" * SKIP_CHUNK_BYTES
CRLFS = b"\r\n" * (SKIP_CHUNK_BYTES // 2)
BLANK_RUN = re.compile(rb"(?:\r?\n)+")


def _nothing() -> None:
    pass


class Line(NamedTuple):
    """A named tuple, not a dataclass: one is made per line of every file, at a third of the
    cost."""

    number: int
    text: str
    """The decoded line with its line ending; ``""`` when ``problem`` is set."""
    end: int
    """Byte offset just after the line."""
    problem: str = ""


def read_lines(
    stream: BinaryIO,
    *,
    number: int = 1,
    offset: int = 0,
    max_bytes: int = MAX_LINE_BYTES,
    on_progress: Callable[[], None] = _nothing,
) -> Iterator[Line]:
    """Lines of ``stream`` read from its current position, which is byte ``offset`` of the file
    and the start of line ``number``."""
    position = offset
    while raw := stream.readline(max_bytes + 1):
        if number % PACE_LINES == 0:
            on_progress()
        size = len(raw)
        if size > max_bytes and not raw.endswith(b"\n"):
            size += _skip_line(stream, on_progress)
            text, problem = "", f"line is longer than {max_bytes} bytes"
        else:
            text, problem = _decode(raw[len(BOM) :] if position == 0 and raw[:3] == BOM else raw)
        position += size
        yield Line(number, text, position, problem)
        number += 1
        if raw in BLANK:
            for lines, size in _blank_runs(stream, on_progress):
                number, position = number + lines, position + size
                yield Line(number - 1, "\n", position)


def _blank_runs(stream: BinaryIO, on_progress: Callable[[], None]) -> Iterator[tuple[int, int]]:
    """Consume the empty lines that follow, a buffer at a time: (lines, bytes) per buffer."""
    peek = getattr(stream, "peek", None)
    while peek is not None and (run := _leading_blank_lines(peek(SKIP_CHUNK_BYTES)))[0]:
        stream.read(run[1])
        on_progress()
        yield run


def _leading_blank_lines(data: bytes) -> tuple[int, int]:
    """(lines, bytes) of the empty lines at the start of ``data``. A buffer made only of
    ``\n`` (or of ``\r\n``) is recognised by one memory comparison: scanning byte by byte
    cost more than inflating the gzip around it."""
    size = len(data)
    if data == NEWLINES[:size]:
        return size, size
    if data == CRLFS[:size] and size % 2 == 0:
        return size // 2, size
    match = BLANK_RUN.match(data)
    run = match.group() if match else b""
    return run.count(b"\n"), len(run)


def _skip_line(stream: BinaryIO, on_progress: Callable[[], None]) -> int:
    """Read up to and including the next newline; return how many bytes that was."""
    skipped = 0
    while chunk := stream.readline(SKIP_CHUNK_BYTES):
        on_progress()
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _decode(raw: bytes) -> tuple[str, str]:
    if b"\x00" in raw:
        return "", "contains a NUL byte (binary data?)"
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return "", f"not valid UTF-8 (byte {exc.start + 1} of the line)"
