"""The harness's pauses and deadlines on real sockets and processes (no pods): the database
proxy's gate holds bytes and lets them through on resume, the balancer gives up on a pod that
never answers at its timeout, a pod's process group or one worker is frozen and thawed, and every
plan holds a pause of a pod and of the database."""

from __future__ import annotations

import random
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos.balancer import DeadlineBalancer
from bench.chaos.cluster import GatedProxy
from bench.chaos.plan import PAUSE_SECONDS, Window, plan
from bench.chaos.pods import Pods, Wiring
from consumer.demo.processes import descendants, spawn


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback server that sends back what it receives."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                while data := connection.recv(1024):
                    connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def test_a_paused_proxy_holds_every_byte_until_it_resumes(echo: int) -> None:
    proxy = GatedProxy(echo)
    proxy.start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
            client.sendall(b"before")
            assert client.recv(64) == b"before"
            proxy.pause()
            client.sendall(b"held")
            client.settimeout(0.5)
            with pytest.raises(TimeoutError):
                client.recv(64)
            proxy.resume()
            client.settimeout(5)
            assert client.recv(64) == b"held"
    finally:
        proxy.stop()


def test_the_balancer_answers_502_at_its_timeout_for_a_pod_that_never_answers() -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody answers
    with silent, DeadlineBalancer([silent.getsockname()[1]], 0, timeout=0.5) as balancer:
        began = time.monotonic()
        status, _ = balancer.forward("/push", b"{}", {"Content-Type": "application/json"})
        assert status == 502
        assert time.monotonic() - began < 3
        assert balancer.traffic.in_flight[silent.getsockname()[1]] == 0


def stopped(pids: dict[int, bool]) -> dict[int, bool]:
    """Whether each process is stopped (``T`` in /proc), as soon as it matches ``pids`` (a signal
    lands asynchronously), or as it is after 5 s."""

    def now() -> dict[int, bool]:
        stats = {pid: Path(f"/proc/{pid}/stat").read_text() for pid in pids}
        return {pid: stat.rsplit(")", 1)[1].split()[0] == "T" for pid, stat in stats.items()}

    deadline = time.monotonic() + 5
    while now() != pids and time.monotonic() < deadline:
        time.sleep(0.02)
    return now()


def test_a_pod_s_whole_group_or_one_worker_is_frozen_and_thawed(tmp_path: Path) -> None:
    worker = "import time; time.sleep(60)"
    arbiter = ("import subprocess, sys, time; "
               f"subprocess.Popen([sys.executable, '-c', {worker!r}]); print('up', flush=True); "
               "time.sleep(60)")  # fmt: skip
    log = tmp_path / "pod-1.log"
    child = spawn("pod-1", [sys.executable, "-c", arbiter], log, {})
    pods = Pods([0], Wiring("", 0, "", "", tmp_path))
    pods.children[0] = child
    try:
        deadline = time.monotonic() + 10
        # Once the arbiter says so, its worker has started: a worker stopped mid-start (between
        # vfork and exec) would hold its parent with it.
        while "up" not in log.read_text():
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        (pid,) = pods.workers(0)
        assert pods.freeze(0, pid) == {pid}
        expected = {pid: True, child.pid: False}
        assert stopped(expected) == expected
        pods.thaw(0)
        expected = {pid: False, child.pid: False}
        assert stopped(expected) == expected
        assert pods.freeze(0) == {child.pid, pid} == {child.pid, *descendants(child.pid)}
        expected = {pid: True, child.pid: True}
        assert stopped(expected) == expected
        pods.thaw(0)
        expected = {pid: False, child.pid: False}
        assert stopped(expected) == expected
    finally:
        child.kill()


@pytest.mark.parametrize("seconds", [60, 120, 600])
def test_every_plan_pauses_a_pod_and_the_database_past_the_ack_deadline(seconds: int) -> None:
    window = Window.of(seconds)
    for seed in range(20):
        planned = [p for family in plan(window, random.Random(seed)) for p in family]
        pauses = [p for p in planned if p.kind in ("pod-pause", "db-pause")]
        assert {p.kind for p in pauses} == {"pod-pause", "db-pause"}
        assert all(PAUSE_SECONDS[0] <= p.seconds <= max(15, seconds / 4) for p in pauses)
        assert all(window.first <= p.at and p.at + p.seconds <= seconds for p in pauses)
