"""A TCP proxy on loopback between clients (workers, producers) and one server, with the
network's faults to switch on and off while they run, as Jepsen's and Toxiproxy's are:

- ``delay(seconds)``: every chunk waits that long in each direction (latency);
- ``partition()`` until ``heal()``: nothing is delivered either way, and a new
  connection is accepted but held unanswered (a blackhole, not a refusal: a client sees
  a timeout, as across a real partition); at the heal what was held is delivered in
  order, as TCP's retransmissions would, and the held connections go through;
- ``cut()``: every open connection is closed at once (a reset; new ones go through).

Each connection is two pumps (one each way), each a reader thread that stamps what it
reads and a writer thread that sends it when due and not partitioned: delays keep their
order and never block the reading side.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_CHUNK = 65536
_END = b""  # a pump's reader saw its side close


class _Pump:
    """One direction of one connection: ``source`` to ``target``."""

    def __init__(self, proxy: FaultProxy, source: socket.socket, target: socket.socket) -> None:
        self._proxy = proxy
        self._source, self._target = source, target
        self._line: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self.threads = [
            threading.Thread(target=self._read, daemon=True, name="proxy-read"),
            threading.Thread(target=self._write, daemon=True, name="proxy-write"),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = self._source.recv(_CHUNK)
            except OSError:
                data = _END
            self._line.put((time.monotonic() + self._proxy.latency_s, data))
            if not data:
                return

    def _write(self) -> None:
        while True:
            due, data = self._line.get()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._proxy.wait_healed()
            if not data:
                with contextlib.suppress(OSError):
                    self._target.shutdown(socket.SHUT_WR)
                return
            try:
                self._target.sendall(data)
            except OSError:
                return


class FaultProxy:
    """Listens on ``127.0.0.1:port`` and forwards each connection to ``upstream``;
    ``listener``, when given, is the listening socket to use (one made inside a network
    namespace: ``lossy_net.py``)."""

    def __init__(
        self, upstream_host: str, upstream_port: int, listener: socket.socket | None = None
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.latency_s = 0.0
        self._healed = threading.Event()
        self._healed.set()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = listener or socket.create_server(("127.0.0.1", 0), backlog=256)
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="proxy")
        self._acceptor.start()

    # -- faults ------------------------------------------------------------------------------

    def delay(self, seconds: float) -> None:
        """Latency each way from now on (0: none); chunks already read keep theirs."""
        self.latency_s = seconds

    def partition(self) -> None:
        """Deliver nothing, either way, until ``heal``; hold new connections unanswered."""
        self._healed.clear()

    def heal(self) -> None:
        """End a partition: what was held goes through, in order."""
        self._healed.set()

    @property
    def partitioned(self) -> bool:
        return not self._healed.is_set()

    def cut(self) -> None:
        """Close every open connection at once (new ones go through)."""
        with self._lock:
            open_sockets, self._sockets = self._sockets, []
        for sock in open_sockets:
            with contextlib.suppress(OSError):  # a reset, which wakes a blocked recv too
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    @contextmanager
    def partitioned_for(self, seconds: float) -> Iterator[None]:
        """A partition for the block, at least ``seconds`` long."""
        self.partition()
        started = time.monotonic()
        try:
            yield
        finally:
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))
            self.heal()

    def wait_healed(self) -> None:
        while not self._healed.wait(0.5):
            if self._closed:
                return

    def close(self) -> None:
        self._closed = True
        self.heal()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    # -- forwarding -----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._link, args=(client,), daemon=True).start()

    def _link(self, client: socket.socket) -> None:
        with self._lock:
            self._sockets.append(client)
        self.wait_healed()  # a connection made across a partition is held unanswered
        try:
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        server.settimeout(None)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._sockets.append(server)
        _Pump(self, client, server).start()
        _Pump(self, server, client).start()
