"""systemd's service notifications, for a worker run by a unit with ``Type=notify``
(systemd sets ``$NOTIFY_SOCKET``; ``examples/deploy/tickwork-worker.service``):
``READY=1`` once the worker started, ``WATCHDOG=1`` while it is alive (``health.py``) at
least twice per ``WatchdogSec``, so systemd restarts a worker whose heartbeat stalled,
and ``STOPPING=1`` when it starts to drain, each with a ``STATUS=`` line that
``systemctl status`` shows. Without ``$NOTIFY_SOCKET`` the worker does none of this.

The protocol is one datagram per notification on a Unix socket (``sd_notify(3)``); a
name starting with ``@`` is in the abstract namespace.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping

from tickwork.workers.reporting.health import Health

log = logging.getLogger("tickwork.worker")


class SystemdNotifier:
    """Tells systemd how the worker is, from ``run()`` until ``until`` is set."""

    def __init__(self, address: str, watchdog_s: float | None, health: Health) -> None:
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._watchdog_s = watchdog_s
        self._health = health

    @classmethod
    def from_environment(
        cls, health: Health, environ: Mapping[str, str] = os.environ
    ) -> SystemdNotifier | None:
        """The notifier systemd asks for, or None when not run by a ``Type=notify`` unit.
        The watchdog is this process's when ``$WATCHDOG_USEC`` is set and
        ``$WATCHDOG_PID`` is unset or names it."""
        address = environ.get("NOTIFY_SOCKET")
        if not address:
            return None
        watchdog_s = None
        usec, pid = environ.get("WATCHDOG_USEC"), environ.get("WATCHDOG_PID")
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            watchdog_s = int(usec) / 1_000_000
        return cls(address, watchdog_s, health)

    def run(self, draining: threading.Event, until: threading.Event) -> None:
        """Ready now; the watchdog's pings while alive; stopping once ``draining`` is set."""
        self.send("READY=1", f"STATUS=running (pid {os.getpid()})")
        period = 1.0 if self._watchdog_s is None else min(1.0, self._watchdog_s / 3)
        told_stopping = False
        while not until.wait(period):
            if draining.is_set() and not told_stopping:
                self.send("STOPPING=1", "STATUS=draining: finishing running handlers")
                told_stopping = True
            if self._watchdog_s is not None:
                verdict = self._health.alive()
                if verdict.ok:
                    self.send("WATCHDOG=1")
                else:  # no ping: systemd restarts the worker when WatchdogSec runs out
                    why = "; ".join(v for v in verdict.checks.values() if v != "ok")
                    self.send(f"STATUS=not alive: {why}")
        if not told_stopping:
            self.send("STOPPING=1")

    def send(self, *lines: str) -> None:
        """One notification (its lines joined by newlines)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto("\n".join(lines).encode(), self._address)
        except OSError as err:
            log.warning("cannot notify systemd on %s: %s", self._address, err)
