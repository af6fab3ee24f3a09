"""The outcome table of docs/architecture.md section 3 (``consumer.wire.outcomes``), one case per
row, each driven through ``Dispatcher`` on SQLite and PostgreSQL: the HTTP status, the outcome and
the inbox row every situation of the row gives. ``ROWS`` holds the table as the doc prints it, so a
row changed in the doc, or a decision changed in the code, fails here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.wire.outcomes import Kind
from tests.conftest import Clock
from tests.pipeline.outcome_rig import (
    NOW,
    Rig,
    Seen,
    database_unreachable,
    dead,
    duplicate,
    from_the_future,
    handled_now,
    in_progress,
    incomplete,
    large_slot_taken,
    lease_lost_acked,
    lease_lost_nacked,
    malformed,
    refused,
    retried,
    skipped,
    too_large,
    too_slow,
    unauthorized,
    unroutable,
)

pytestmark = pytest.mark.clock(NOW)  # leases and tick slots move only by hand
ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


@dataclass(frozen=True)
class Row:
    doc: tuple[str, str, str, str]
    """The row as docs/architecture.md prints it: situation, status, outcome, inbox row."""
    drive: Callable[[Rig], list[Seen]]
    seen: tuple[Seen, ...]
    """What ``drive``'s deliveries give, in order: the row's promise, case by case."""


ROWS = (
    Row(("handled now", "200", "`done` + the handler's JSON result", "`done`"),
        handled_now, (Seen(200, "done", "done"),)),
    Row(("duplicate of a done / dead / skipped / unroutable event", "200", "`duplicate`",
         "unchanged"), duplicate, (Seen(200, "duplicate", "unchanged"),) * 4),
    Row(("same key running elsewhere with a live lease: a copy under another messageId / a "
         "redelivery of the running message (or any copy while a deploy hook or the CLI runs "
         "it)", "200 / 409", "`in-progress`", "unchanged"), in_progress,
        (Seen(200, "in-progress", "unchanged"), Seen(409, "in-progress", "unchanged"),
         Seen(409, "in-progress", "unchanged"))),
    Row(("handler raised `Retryable` or any unexpected error, attempts left", "503", "`retry`",
         "`failed`"), retried, (Seen(503, "retry", "failed"),) * 2),
    Row(("handler raised `Incomplete` (progress committed, budget spent)", "503", "`retry`",
         "`failed`, the attempt refunded"), incomplete,
        (Seen(503, "retry", "failed, the attempt refunded"),)),
    Row(("handler raised `Permanent`, or attempts exhausted", "200", "`dead`",
         "`dead`, full message kept"), dead,
        (Seen(200, "dead", "dead, full message kept"),) * 2),
    Row(("no handler for the event (no task of that name, no handler for its route or "
         "CloudEvent type)", "200", "`unroutable`", "`unroutable`, full message kept"),
        unroutable, (Seen(200, "unroutable", "unroutable, full message kept"),)),
    Row(("stale tick, or a handler raised `Skip`", "200", "`skipped`", "`skipped`"), skipped,
        (Seen(200, "skipped", "skipped"),) * 2),
    Row(("tick whose slot begins after our clock (beyond the tolerance)", "200", "`skipped`",
         "none written"), from_the_future, (Seen(200, "skipped", "none written"),)),
    Row(("the lease was taken over while the handler ran, by another message that is "
         "redelivered if it dies, or the row is finished", "200", "`lease-lost`",
         "the new owner's"), lease_lost_acked, (Seen(200, "lease-lost", "the new owner's"),) * 2),
    Row(("the lease was taken over by a copy of the same message, or the owner cannot be read",
         "409", "`lease-lost`", "the new owner's"), lease_lost_nacked,
        (Seen(409, "lease-lost", "the new owner's"),)),
    Row(("a subscription or endpoint that may not start the event's route; an unsigned "
         "`run_now` or continuation", "200", "`dead` (refused)",
         "`dead` under `refused:SUBSCRIPTION:MESSAGE_ID`, full message kept"), refused,
        (Seen(200, "dead", "dead under refused:SUBSCRIPTION:MESSAGE_ID, full message kept"),) * 2),
    Row(("database unreachable", "503", "`unavailable`", "nothing written"), database_unreachable,
        (Seen(503, "unavailable", "nothing written"),)),
    Row(("malformed envelope or event", "400", "`rejected`", "nothing stored"), malformed,
        (Seen(400, "rejected", "nothing stored"),) * 2),
    Row(("missing / invalid token; wrong caller", "401; 403", "`rejected`", "nothing stored"),
        unauthorized, (Seen(401, "rejected", "nothing stored"),
                       Seen(403, "rejected", "nothing stored"))),
    Row(("body over `CONSUMER_MAX_BODY_BYTES`", "413", "`rejected`", "nothing stored"),
        too_large, (Seen(413, "rejected", "nothing stored"),)),
    Row(("body not whole within `CONSUMER_BODY_TIMEOUT_SECONDS`", "408", "`rejected`",
         "nothing stored"), too_slow, (Seen(408, "rejected", "nothing stored"),)),
    Row(("a body over 1 MiB while the server's large-body slot stays taken", "503",
         "`unavailable`", "nothing stored"), large_slot_taken,
        (Seen(503, "unavailable", "nothing stored"),)),
)  # fmt: skip


@pytest.fixture
def rig(engine: Engine, clock: Clock, settings: Settings) -> Rig:
    return Rig(engine, clock, settings)


@pytest.mark.parametrize("row", ROWS, ids=[row.drive.__name__ for row in ROWS])
def test_each_row_of_the_outcome_table_is_what_the_dispatcher_decides(rig: Rig, row: Row) -> None:
    assert tuple(row.drive(rig)) == row.seen


def documented_rows() -> list[tuple[str, ...]]:
    """The rows of the table under section 3 of docs/architecture.md, cell by cell."""
    section = ARCHITECTURE.read_text().split("## 3.", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    return [tuple(cell.strip() for cell in line.strip("| ").split(" | ")) for line in lines[1:]]


def test_the_table_tested_is_the_documented_one() -> None:
    assert documented_rows() == [row.doc for row in ROWS]


def test_every_outcome_but_our_own_500_has_a_row() -> None:
    """``error`` is a bug of ours, no client's doing: the doc explains it below the table."""
    tested = {seen.outcome for row in ROWS for seen in row.seen}
    assert tested == {kind.value for kind in Kind} - {Kind.ERROR.value}
