"""The original design, kept only to be watched failing: a pod whose in-process timer selects
pending email jobs and sends them, with no claim. Every replica runs the same timer, so
replicas whose timers overlap send the same jobs.

    python -m consumer.demo.naive --database URL --smtp-port PORT --every SECONDS
"""

from __future__ import annotations

import argparse
import json
import signal
import smtplib
import threading
from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any

from sqlalchemy import Engine, bindparam, create_engine, text

from consumer.wire.timeutil import utcnow

SELECT_PENDING = text(
    "SELECT id, payload FROM jobs WHERE status = 'pending' AND kind = 'email' ORDER BY id LIMIT 500"
)
MARK_DONE = text(
    "UPDATE jobs SET status = 'done', finished_at = :now, updated_at = :now WHERE id IN :ids"
).bindparams(bindparam("ids", expanding=True))


def sweep_once(engine: Engine, smtp_port: int) -> int:
    """What the timer did on every replica: read the pending set, send it, mark it done."""
    sent = 0
    while rows := _pending(engine):
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=30) as smtp:
            for row in rows:
                smtp.send_message(_message(row.payload))
        with engine.begin() as connection:
            connection.execute(MARK_DONE, {"ids": [row.id for row in rows], "now": utcnow()})
        sent += len(rows)
    return sent


def _pending(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        return list(connection.execute(SELECT_PENDING))


def _message(payload: Any) -> EmailMessage:
    if isinstance(payload, str):  # SQLite hands JSON back as text to a raw query
        payload = json.loads(payload)
    message = EmailMessage()
    message["From"] = "reports@example.com"
    message["To"] = payload["to"]
    message["Subject"] = payload.get("subject", "")
    message.set_content(payload.get("text", ""))
    return message


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="consumer.demo.naive", description=__doc__)
    parser.add_argument("--database", required=True)
    parser.add_argument("--smtp-port", type=int, required=True)
    parser.add_argument("--every", type=float, default=2.0)
    args = parser.parse_args(argv)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    engine = create_engine(args.database)
    while not stopping.is_set():
        sweep_once(engine, args.smtp_port)
        stopping.wait(args.every)
    engine.dispose()


if __name__ == "__main__":
    main()
