"""A slow-client attack and an availability probe, for the test and for bench/slow_clients.py.

Each attacker opens a connection, sends ``POST /push HTTP/1.1`` and then dribbles one byte every
``interval`` seconds, of its headers or (after whole headers announcing a large body) of its body,
reconnecting as soon as the server closes it. The probe asks ``/healthz`` and ``/push`` once a
second each and counts the answers that came back in time with the expected status.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import requests

HEADERS_MODE = "headers"
BODY_MODE = "body"


class SlowClients:
    """``count`` attacker threads (half dribbling headers, half bodies) until ``stop()``."""

    def __init__(self, host: str, port: int, count: int = 16, interval: float = 4.5) -> None:
        self.address = (host, port)
        self.interval = interval
        self.modes = [HEADERS_MODE if n % 2 == 0 else BODY_MODE for n in range(count)]
        self.connections = 0
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._attack, args=(mode,), daemon=True) for mode in self.modes
        ]

    def start(self) -> SlowClients:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(timeout=self.interval + 5)

    def _attack(self, mode: str) -> None:
        while not self._stopped.is_set():
            try:
                with socket.create_connection(self.address, timeout=5) as sock:
                    self.connections += 1
                    self._dribble(sock, mode)
            except OSError:
                self._stopped.wait(0.2)  # refused or reset: reconnect, as an attacker would

    def _dribble(self, sock: socket.socket, mode: str) -> None:
        drip: Iterator[int]
        if mode == HEADERS_MODE:
            sock.sendall(b"POST /push HTTP/1.1\r\n")
            drip = itertools.chain(b"X-Slow: ", itertools.repeat(ord("a")))
        else:
            sock.sendall(
                b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 14000000\r\n\r\n"
            )
            drip = itertools.repeat(ord("{"))
        for byte in drip:
            if self._stopped.wait(self.interval):
                return
            sock.sendall(bytes([byte]))  # raises once the server has closed the connection


@dataclass
class Availability:
    asked: dict[str, int] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)

    def ratio(self, name: str | None = None) -> float:
        names = [name] if name else list(self.asked)
        asked = sum(self.asked[n] for n in names)
        return sum(self.answered.get(n, 0) for n in names) / asked if asked else 0.0


Probe = Callable[[float], bool]


def probe_healthz(base: str) -> Probe:
    return lambda timeout: requests.get(f"{base}/healthz", timeout=timeout).status_code == 200


def probe_push(base: str, body: bytes, expected: int) -> Probe:
    def ask(timeout: float) -> bool:
        headers = {"Content-Type": "application/json"}
        response = requests.post(f"{base}/push", data=body, headers=headers, timeout=timeout)
        return response.status_code == expected

    return ask


def measure(probes: dict[str, Probe], seconds: float, timeout: float = 3.0) -> Availability:
    """Each probe once a second for ``seconds`` (probes run one after another, each bounded)."""
    result = Availability()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tick = time.monotonic()
        for name, probe in probes.items():
            result.asked[name] = result.asked.get(name, 0) + 1
            try:
                ok = probe(timeout)
            except requests.RequestException:
                ok = False
            result.answered[name] = result.answered.get(name, 0) + int(ok)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    return result
