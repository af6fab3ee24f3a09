"""The request watchdog ends the worker even when logging cannot: stderr is a full pipe nobody
reads, and another thread, stuck writing its own line there, holds the log handler's lock. Before,
the watchdog logged first (taking that lock) and so never exited."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

STUCK_LOGGING = textwrap.dedent(
    """
    import logging, os, sys, threading, time
    from types import SimpleNamespace

    from consumer.http.bridge import BufferedWsgi
    from consumer.http.worker import ConsumerWorker

    reader, writer = os.pipe()
    os.dup2(writer, 2)
    os.set_blocking(2, False)
    try:
        while True:
            os.write(2, b"x" * 65536)
    except BlockingIOError:
        pass  # the pipe is full
    os.set_blocking(2, True)
    logging.getLogger().addHandler(logging.StreamHandler(sys.stderr))
    threading.Thread(target=logging.getLogger("other").error, args=("stuck",), daemon=True).start()
    time.sleep(0.3)  # that thread now holds the handler's lock, blocked in its write

    worker = ConsumerWorker.__new__(ConsumerWorker)
    worker.cfg = SimpleNamespace(timeout=1)
    app = BufferedWsgi.__new__(BufferedWsgi)
    app.oldest_seconds = lambda: 5.0  # a request older than the ack deadline
    worker.asgi = app
    worker.notify()
    """
)


def test_the_watchdog_exits_when_a_log_write_is_stuck() -> None:
    try:
        done = subprocess.run([sys.executable, "-c", STUCK_LOGGING], timeout=20, check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError("the watchdog froze on a stuck log write") from None
    assert done.returncode == 1


EXPIRED = textwrap.dedent(
    """
    import logging
    from types import SimpleNamespace

    from consumer.http.bridge import BufferedWsgi
    from consumer.http.worker import ConsumerWorker
    from consumer.observe.logs import formatter

    handler = logging.StreamHandler()
    handler.setFormatter(formatter("json"))
    logging.getLogger().addHandler(handler)
    worker = ConsumerWorker.__new__(ConsumerWorker)
    worker.cfg = SimpleNamespace(timeout=1)
    app = BufferedWsgi.__new__(BufferedWsgi)
    app.oldest_seconds = lambda: 5.0
    worker.asgi = app
    worker.notify()
    """
)


def test_the_watchdog_says_why_it_exits_in_the_log_format() -> None:
    done = subprocess.run([sys.executable, "-c", EXPIRED], capture_output=True, timeout=20)
    line = json.loads(done.stderr.decode().strip().splitlines()[-1])
    assert done.returncode == 1
    assert (line["severity"], line["logger"]) == ("ERROR", "consumer.worker")
    assert "outlived the ack deadline" in line["message"] and line["timeout_seconds"] == 1
