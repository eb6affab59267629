"""A network namespace whose loopback drops a share of its packets, for Jepsen's lossy
network: workers run inside it (``prefix`` before their command), and the fault proxy
(``fault_proxy.py``) listens inside it (``listener()``) while it connects to the real
server on the machine's own loopback, so every server still listens on loopback only.

The loss is an nftables rule on the namespace's ``lo`` (``numgen random mod 100 < N
drop``, on output: each packet crosses it once); TCP retransmits what was dropped, as on
a real lossy link. The proxy adds the latency (this machine's kernel has no ``netem``).
Needs root, ``ip`` and ``nft`` (Debian's ``iproute2`` and ``nftables``, installed here
when missing).
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.servers import ensure_debian_packages

_CLONE_NEWNET = 0x40000000


class LossyNamespace:
    """A network namespace named ``name`` whose loopback drops ``loss_percent`` of its
    packets."""

    def __init__(self, name: str, loss_percent: int) -> None:
        self.name = name
        self.loss_percent = loss_percent

    @property
    def prefix(self) -> list[str]:
        """What runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def dropped(self) -> int:
        """How many packets the loss rule has dropped so far."""
        listed = subprocess.run(
            [*self.prefix, "nft", "list", "chain", "inet", "loss", "out"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        found = re.search(r"counter packets (\d+)", listed)
        return int(found.group(1)) if found else 0

    def listener(self) -> socket.socket:
        """A listening TCP socket on the namespace's ``127.0.0.1`` (a free port): made by
        a thread that joins the namespace (``setns`` moves only the calling thread), so
        the rest of this process stays on the machine's own network."""
        made: list[socket.socket | BaseException] = []

        def make() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
                try:
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns failed")
                finally:
                    os.close(fd)
                made.append(socket.create_server(("127.0.0.1", 0), backlog=256))
            except BaseException as error:  # handed to the caller's thread
                made.append(error)

        thread = threading.Thread(target=make, name="netns-listener")
        thread.start()
        thread.join()
        if isinstance(made[0], BaseException):
            raise made[0]
        return made[0]


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


@contextmanager
def lossy_namespace(loss_percent: int) -> Iterator[LossyNamespace]:
    """A namespace made for the block and deleted after it."""
    ensure_debian_packages(["ip", "nft"], ["iproute2", "nftables"])
    name = f"tw-loss-{os.getpid()}"
    _run("ip", "netns", "add", name)
    try:
        inside = ["ip", "netns", "exec", name]
        _run(*inside, "ip", "link", "set", "lo", "up")
        if loss_percent:
            _run(*inside, "nft", "add", "table", "inet", "loss")
            _run(
                *inside,
                "nft",
                "add chain inet loss out { type filter hook output priority 0; }",
            )
            _run(
                *inside,
                "nft",
                f"add rule inet loss out numgen random mod 100 < {loss_percent} counter drop",
            )
        yield LossyNamespace(name, loss_percent)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
