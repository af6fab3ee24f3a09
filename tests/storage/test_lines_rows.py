"""Bytes -> lines -> records: line numbers, offsets and bad input, without I/O."""

from __future__ import annotations

import io
import re

import pytest

from consumer.storage.lines import Line, read_lines
from consumer.storage.rows import (
    EmptyFile,
    FileRejected,
    Record,
    csv_header,
    csv_records,
    jsonl_records,
)


def lines(data: bytes, **kwargs: int) -> list[tuple[int, str, int, str]]:
    found = read_lines(io.BytesIO(data), **kwargs)
    return [(line.number, line.text, line.end, line.problem) for line in found]


def csv(data: bytes) -> tuple[list[str], list[Record]]:
    stream = read_lines(io.BytesIO(data))
    header = csv_header(stream)
    return header, list(csv_records(stream, header))


def test_lines_carry_number_text_and_end_offset() -> None:
    assert lines(b"a\r\nbb\nccc") == [(1, "a\r\n", 3, ""), (2, "bb\n", 6, ""), (3, "ccc", 9, "")]


def test_a_bom_is_dropped_but_counted_in_offsets() -> None:
    assert lines(b"\xef\xbb\xbfa\nb\n") == [(1, "a\n", 5, ""), (2, "b\n", 7, "")]


def test_bad_lines_are_reported_not_fatal() -> None:
    found = lines(b"ok\ncaf\xe9\nnul\x00\nok\n")
    assert [(n, p) for n, _, _, p in found] == [
        (1, ""), (2, "not valid UTF-8 (byte 4 of the line)"),
        (3, "contains a NUL byte (binary data?)"), (4, ""),
    ]  # fmt: skip
    assert found[-1][2] == 16


def test_an_overlong_line_is_skipped_in_bounded_reads() -> None:
    data = b"short\n" + b"x" * 5000 + b"\nafter\n"
    found = lines(data, max_bytes=100)
    assert [(n, t, p) for n, t, _, p in found] == [
        (1, "short\n", ""), (2, "", "line is longer than 100 bytes"), (3, "after\n", ""),
    ]  # fmt: skip
    assert found[-1][2] == len(data)


def test_reading_resumes_at_an_offset() -> None:
    stream = io.BytesIO(b"a\nb\nc\n")
    stream.seek(2)
    assert [(n, t) for n, t, _, _ in lines(stream.read(), number=2, offset=2)] == [
        (2, "b\n"), (3, "c\n"),
    ]  # fmt: skip


def test_csv_rows_with_quoted_newlines_keep_their_first_line() -> None:
    header, records = csv(b'to,text\na@x.io,"two\nlines"\n\nb@x.io,plain\n')
    assert header == ["to", "text"]
    assert [(r.line, r.last_line, r.fields, r.blank) for r in records] == [
        (2, 3, {"to": "a@x.io", "text": "two\nlines"}, False),
        (4, 4, None, True),  # a blank line is no row, but it is a resume point
        (5, 5, {"to": "b@x.io", "text": "plain"}, False),
    ]
    assert records[-1].end == len(b'to,text\na@x.io,"two\nlines"\n\nb@x.io,plain\n')


def test_csv_rows_with_problems_are_rejected_by_line() -> None:
    data = b'to,n\na@x.io,1\nb@x.io\nc@x.io,1,2\nd\xff,1\ne@x.io,"bad"quote\nf@x.io,6\n'
    _, records = csv(data)
    assert [(r.line, r.problem) for r in records] == [
        (2, ""),
        (3, "expected 2 fields, found 1"),
        (4, "expected 2 fields, found 3"),
        (5, "line 5: not valid UTF-8 (byte 2 of the line)"),
        (6, "malformed CSV: ',' expected after '\"'"),
        (7, ""),
    ]
    assert records[5].fields == {"to": "f@x.io", "n": "6"}


def test_an_unterminated_quote_at_the_end_is_rejected() -> None:
    _, records = csv(b'to,n\na@x.io,"never closed\n')
    assert [(r.line, r.fields is None, r.problem) for r in records] == [
        (2, True, "malformed CSV: unexpected end of data")
    ]


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"", EmptyFile, "empty"),
        (b"\n\n", EmptyFile, "empty"),
        (b"\xff\xfet\x00o\x00\n\x00", FileRejected, "header row is unreadable"),  # UTF-16
        (b"to,,n\n", FileRejected, "empty column name"),
        (b"to,to\n", FileRejected, "repeats columns ['to']"),
    ],
)
def test_a_bad_header_rejects_the_file(data: bytes, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        csv(data)


def test_header_only_has_no_records() -> None:
    assert csv(b"to,subject\n") == (["to", "subject"], [])


def test_json_lines() -> None:
    data = b'{"to": "a@x.io"}\n\n[1]\n{"to": "b@x.io", "n": NaN}\n{"to": "c@x\n{"to": "d@x.io"}'
    records = list(jsonl_records(read_lines(io.BytesIO(data))))
    assert [r.line for r in records if r.blank] == [2]
    assert [(r.line, r.fields) for r in records if not r.problem and not r.blank] == [
        (1, {"to": "a@x.io"}), (6, {"to": "d@x.io"}),
    ]  # fmt: skip
    rejected = {r.line: r.problem for r in records if r.problem}
    assert rejected[3] == "expected a JSON object, found list"
    assert rejected[4].startswith("invalid JSON: NaN is not JSON")
    assert rejected[5].startswith("invalid JSON: Unterminated string")
    assert records[-1].end == len(data)


def test_blank_lines_and_skipped_long_lines_still_report_progress() -> None:
    calls: list[int] = []
    blank = read_lines(io.BytesIO(b"\n" * 5000), on_progress=lambda: calls.append(1))
    found = list(jsonl_records(blank))
    assert all(record.blank for record in found) and found[-1].line == 5000
    assert len(calls) == 5
    calls.clear()
    long_line = read_lines(
        io.BytesIO(b"x" * (1 << 20) + b"\n"), max_bytes=100, on_progress=lambda: calls.append(1)
    )
    assert [record.problem for record in jsonl_records(long_line)] == [
        "line is longer than 100 bytes"
    ]
    assert len(calls) >= 16


def test_a_run_of_blank_lines_is_read_a_buffer_at_a_time() -> None:
    """A gigabyte of newlines would be a billion steps; buffered, it is one blank line per
    buffer, numbered after the last line of the run, and the numbering after it is exact."""
    data = b"a\n" + b"\n" * 300_000 + b"\r\n" * 1000 + b"b\r\n\r\r\nc"
    calls: list[int] = []
    stream = io.BufferedReader(io.BytesIO(data))
    found = list(read_lines(stream, on_progress=lambda: calls.append(1)))
    assert len(found) < 60  # 8 KiB buffers: 300,000 lines in a few dozen steps
    assert found[0] == Line(1, "a\n", 2) and found[1] == Line(2, "\n", 3)
    assert all(line.text in ("\n", "\r\n") for line in found[1:-3])
    assert [(line.number, line.text) for line in found[-3:]] == [
        (301_002, "b\r\n"), (301_003, "\r\r\n"), (301_004, "c"),
    ]  # fmt: skip
    assert found[-4].number == 301_001 and found[-1].end == len(data)
    assert calls  # the pacer still beats inside the run
