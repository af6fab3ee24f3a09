"""A local stand-in for Cloud Scheduler: every ``--every`` seconds, publish one tick per task to a
Pub/Sub topic, exactly as a Scheduler job with a Pub/Sub target does (attribute ``task``, the data
the job is configured with, and no scheduled-time field: ``publishTime`` is the only clock).

    python -m triggers.local.scheduler --pubsub-host 127.0.0.1:8085 --task sweep --every 60

Rounds fall on multiples of ``--every`` seconds since the epoch, as a ``*/N`` cron job's runs
fall on the minute: with the tasks' period set to the same number of seconds
(``CONSUMER_TICK_PERIODS``, which ``triggers/local/up`` exports), each round is its own slot.
Stops on SIGTERM or SIGINT, or after ``--count`` rounds.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Sequence

from consumer.ticks.stand_in import Pace, Schedule, run_rounds
from triggers.local.stack import DEFAULT_PROJECT, TICK_TOPIC, publisher

PUBLISH_TIMEOUT_SECONDS = 10


def publish_ticks(pubsub_host: str, topic: str, tasks: Sequence[str]) -> list[str]:
    """One round: a tick per task; returns the message ids."""
    client = publisher(pubsub_host)
    futures = [
        client.publish(topic, json.dumps({"task": task}).encode(), task=task) for task in tasks
    ]
    return [future.result(timeout=PUBLISH_TIMEOUT_SECONDS) for future in futures]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="triggers.local.scheduler", description=__doc__)
    parser.add_argument("--pubsub-host", required=True)
    parser.add_argument("--project", default=DEFAULT_PROJECT)
    parser.add_argument("--topic", default=TICK_TOPIC)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between rounds")
    parser.add_argument("--task", action="append", required=True, help="repeatable")
    parser.add_argument("--count", type=int, default=0, help="rounds to publish (0: until stopped)")
    args = parser.parse_args(argv)
    if args.every <= 0:
        parser.error("--every must be positive")
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    topic = f"projects/{args.project}/topics/{args.topic}"
    schedule = Schedule(args.every, Pace.ALIGNED, count=args.count)
    run_rounds(schedule, lambda: publish_round(args.pubsub_host, topic, args.task), stopping)


def publish_round(pubsub_host: str, topic: str, tasks: Sequence[str]) -> None:
    """One round, its message ids printed; a failure is printed and the round missed."""
    try:
        ids = publish_ticks(pubsub_host, topic, tasks)
        print(f"published ticks {dict(zip(tasks, ids, strict=True))}", flush=True)
    except Exception as exc:  # the emulator restarting: a missed round, like Scheduler's
        print(f"publishing failed: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
