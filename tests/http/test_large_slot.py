"""One large body at a time in the whole server: two worker processes of one parent (as gunicorn's
workers are of their arbiter) contend for the slot through the real ``flock``; the one that cannot
get it before its deadline gives up (the bridge answers 503), and gets it once it is free."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from multiprocessing.connection import Connection

from consumer.http.large_slot import SlotTimeout, large_body_slot

HOLD_SECONDS = 1.5


def hold_the_slot(ready: Connection, release: Connection) -> None:
    """A worker reading a large body: it holds the slot until told to let go."""

    async def hold() -> None:
        async with large_body_slot(time.monotonic() + 5):
            ready.send("holding")
            while not release.poll():
                await asyncio.sleep(0.01)

    asyncio.run(hold())


def try_the_slot(seconds: float, result: Connection) -> None:
    """Another worker: whether it got the slot within ``seconds``, after how long, and when
    (``time.monotonic()``, the same clock in every process of the machine)."""

    async def attempt() -> None:
        started = time.monotonic()
        try:
            async with large_body_slot(started + seconds):
                result.send(("got it", time.monotonic() - started, time.monotonic()))
        except SlotTimeout:
            result.send(("timed out", time.monotonic() - started, time.monotonic()))

    asyncio.run(attempt())


def test_a_second_process_waits_for_the_slot_and_gives_up_at_its_deadline() -> None:
    forked = multiprocessing.get_context("fork")
    ready_in, ready_out = forked.Pipe(duplex=False)
    release_in, release_out = forked.Pipe(duplex=False)
    result_in, result_out = forked.Pipe(duplex=False)
    holder = forked.Process(target=hold_the_slot, args=(ready_out, release_in))
    holder.start()
    try:
        assert ready_in.poll(10) and ready_in.recv() == "holding"
        first = forked.Process(target=try_the_slot, args=(0.5, result_out))
        first.start()
        assert result_in.poll(10)
        outcome, waited, _ = result_in.recv()
        assert outcome == "timed out" and 0.45 <= waited < HOLD_SECONDS
        first.join(10)

        second = forked.Process(target=try_the_slot, args=(10.0, result_out))
        second.start()
        time.sleep(0.3)  # still held: the second one is waiting
        assert not result_in.poll(0)
        released = time.monotonic()
        release_out.send("done")
        assert result_in.poll(10)
        # Got only after the holder was told to let go (not "waited >= 0.3": the second process
        # starts its own clock once it runs, and under load it measured 0.298 s).
        outcome, _, got_at = result_in.recv()
        assert outcome == "got it" and got_at > released
        second.join(10)
    finally:
        release_out.send("done")
        holder.join(10)
        if holder.is_alive():
            holder.kill()
