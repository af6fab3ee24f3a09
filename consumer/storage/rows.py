"""Lines -> records: CSV with a header row, or JSON Lines. Pure: no I/O of its own.

A record knows the lines it came from, so a rejected row is reported by line number and a
committed one gives the resume point. Blank lines are no rows, but they are passed on as
``blank`` records: a long stretch of them still moves the resume point forward.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from consumer.storage.lines import Line

MAX_COLUMNS = 1000


class FileRejected(Exception):
    """The file as a whole cannot be read (no usable header, for instance)."""


class EmptyFile(FileRejected):
    """The file holds no record at all."""


class Record(NamedTuple):
    """A named tuple, made once per row (see ``Line``)."""

    line: int
    """First line of the record (a quoted CSV field may span lines)."""
    last_line: int
    end: int
    """Byte offset after the record: where a resumed run starts."""
    fields: dict[str, Any] | None
    problem: str = ""
    blank: bool = False
    """Only blank lines: no row, but a place a resumed run may start after."""


Span = tuple[int, int, int, str]
"""(first line, last line, byte offset after the last, problem) of one raw CSV record."""


class _Feed:
    """Feeds ``csv.reader`` line by line and remembers the span of the current record."""

    def __init__(self, lines: Iterable[Line]) -> None:
        self.lines = iter(lines)
        self.first: Line | None = None
        self.last: Line | None = None
        self.problem = ""

    def __iter__(self) -> _Feed:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        if self.first is None:
            self.first = line
        self.last = line
        if line.problem:
            self.problem = self.problem or f"line {line.number}: {line.problem}"
            return "\n"
        return line.text

    def take(self, problem: str = "") -> Span:
        """The span read since the last ``take``: (first line, last line, end, problem)."""
        first, last = self.first, self.last
        assert first is not None and last is not None
        span = (first.number, last.number, last.end, self.problem or problem)
        self.first, self.problem = None, ""
        return span


def csv_header(lines: Iterable[Line]) -> list[str]:
    """The column names from the first non-blank record of ``lines``."""
    for (_, _, _, problem), values in _csv(_Feed(lines)):
        if problem:
            raise FileRejected(f"the header row is unreadable: {problem}")
        if values:
            return _columns(values)
    raise EmptyFile("the file is empty")


def csv_records(lines: Iterable[Line], header: Sequence[str]) -> Iterator[Record]:
    """Data records as ``{column: value}``; a wrong number of fields rejects the row."""
    width = len(header)
    for (first, last, end, problem), values in _csv(_Feed(lines)):
        if problem:
            yield Record(first, last, end, None, problem)
        elif not values:
            yield Record(first, last, end, None, blank=True)
        elif len(values) != width:
            yield Record(first, last, end, None, f"expected {width} fields, found {len(values)}")
        else:
            yield Record(first, last, end, dict(zip(header, values, strict=True)))


def _csv(feed: _Feed) -> Iterator[tuple[Span, list[str]]]:
    """Raw CSV records and their spans; blank lines have no values (and no problem)."""
    reader = csv.reader(feed, strict=True)
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield feed.take(f"malformed CSV: {exc}"), []
            continue
        yield feed.take(), values


def _columns(names: list[str]) -> list[str]:
    columns = [name.strip() for name in names]
    if len(columns) > MAX_COLUMNS:
        raise FileRejected(f"the header has more than {MAX_COLUMNS} columns")
    if not all(columns):
        raise FileRejected(f"the header has an empty column name: {columns}")
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise FileRejected(f"the header repeats columns {duplicates}")
    return columns


def jsonl_records(lines: Iterable[Line]) -> Iterator[Record]:
    """One JSON object per line."""
    for line in lines:
        if not line.problem and not line.text.strip():
            yield Record(line.number, line.number, line.end, None, blank=True)
            continue
        problem = line.problem
        value: Any = None
        if not problem:
            value, problem = _json_object(line.text.rstrip("\r\n"))
        fields = None if problem else value
        yield Record(line.number, line.number, line.end, fields, problem)


def _json_object(text: str) -> tuple[Any, str]:
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"expected a JSON object, found {type(value).__name__}"
    return value, ""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
