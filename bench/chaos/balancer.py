"""The demo's balancer with a forward timeout of at most the ack deadline. Pub/Sub stops waiting
for a push at the deadline; the demo's balancer waits 120 s for a pod, longer than the run's
drain, so a paused pod (its kernel accepts the connection, nobody answers) held the emulator's
two push loops behind it and every subscription stalled. Past the deadline the push is answered
502, which the emulator redelivers as Pub/Sub would."""

from __future__ import annotations

import http.client

from consumer.demo.balancer import Balancer


class DeadlineBalancer(Balancer):
    """``DeadlineBalancer(ports, redeliver_every, timeout)``: ``Balancer`` whose every forward
    gives up after ``timeout`` seconds (a connection that does not answer, or answers slowly)."""

    def __init__(self, pod_ports: list[int], redeliver_every: int, timeout: float) -> None:
        super().__init__(pod_ports, redeliver_every)
        self.timeout = timeout

    def _post_counted(
        self, port: int, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """``Balancer._post_counted`` with the timeout (a ``TimeoutError`` is an ``OSError``:
        ``forward`` answers it 502)."""
        with self.traffic.lock:
            self.traffic.in_flight[port] += 1
        try:
            return post(port, path, body, headers, self.timeout)
        finally:
            with self.traffic.lock:
                self.traffic.in_flight[port] -= 1


def post(
    port: int, path: str, body: bytes, headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()
