"""A loopback TCP proxy a test can cut and restore: a real database outage without touching the
shared server."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self.watch: Callable[[bytes], None] | None = None
        """Sees every chunk the client sends before it is forwarded (it may cut the proxy)."""

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and cut every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, upstream]
            for source, sink, watched in ((client, upstream, True), (upstream, client, False)):
                pipe = threading.Thread(target=self._pipe, args=(source, sink, watched))
                pipe.daemon = True
                pipe.start()

    def _pipe(self, source: socket.socket, sink: socket.socket, watched: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if watched and self.watch is not None:
                    self.watch(chunk)
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
