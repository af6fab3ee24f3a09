"""The deadline bounds the connect too: before a socket exists the timer has nothing to shut,
so a server that never completes the handshake (a listener whose accept queue is full: the
kernel drops the SYN) must not hold the call for the connect timeout requests was given."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress

import pytest
import requests

from consumer.outbound.deadline import Deadline, deadline_session


@contextmanager
def unanswered_port() -> Iterator[int]:
    """A port whose listener never accepts, its backlog already full."""
    with ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):  # fill the accept queue: later handshakes get no answer
            filler = stack.enter_context(socket.socket())
            filler.setblocking(False)
            with suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        time.sleep(0.2)
        yield port


def test_a_connect_that_is_never_answered_ends_at_the_deadline() -> None:
    session = deadline_session()
    with unanswered_port() as port:
        started = time.monotonic()
        with pytest.raises(requests.ConnectionError), Deadline(time.monotonic() + 1.0):
            session.get(f"http://127.0.0.1:{port}/", timeout=(6, 6))
        elapsed = time.monotonic() - started
    assert elapsed < 2, f"the connect took {elapsed:.1f}s for a 1s deadline"


def test_without_a_deadline_the_connect_timeout_given_applies() -> None:
    """The control: the port really leaves a connect waiting, for requests' own timeout."""
    session = deadline_session()
    with unanswered_port() as port:
        started = time.monotonic()
        with pytest.raises(requests.ConnectTimeout):
            session.get(f"http://127.0.0.1:{port}/", timeout=(1.5, 6))
        elapsed = time.monotonic() - started
    assert 1.4 < elapsed < 4, elapsed
