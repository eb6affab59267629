"""The embedded default: one SQLite file in WAL mode, safe for several worker processes.

A write transaction (``BEGIN IMMEDIATE``) is the shard lock: one transaction claims a
whole batch, one transaction acks a whole batch (group commit). With the default
``synchronous=FULL`` an enqueue that returned survives a power cut; a crash before an ack
commits means redelivery, never loss.

URL: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite://:memory:``
(one process only). Query options (``SQLiteOptions``): ``synchronous``
(``full``|``normal``|``extra``), ``busy_timeout_ms``; an unknown or malformed option is a
``ConfigurationError``.
"""

from tickwork.scheduler.backends.sqlite.backend import SQLiteBackend
from tickwork.scheduler.backends.sqlite.options import SQLiteOptions

__all__ = ["SQLiteBackend", "SQLiteOptions"]
