"""Backends behind one interface; the URL scheme chooses one, imported lazily."""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from tickwork.scheduler.backends.base import (
    Backend,
    Claim,
    ClaimBatch,
    Envelope,
    OnConflict,
    Outcome,
    PoisonRecord,
    State,
    StoredMessage,
)
from tickwork.scheduler.backends.options import redacted, sqlite_file
from tickwork.scheduler.backends.records import (
    AbortRequest,
    BatchRecord,
    Failure,
    LedgerEntry,
    MemberOutcome,
    QueueStats,
    RateRequest,
    SlotRequest,
    Waiter,
)
from tickwork.scheduler.clock import Clock
from tickwork.scheduler.errors import ConfigurationError

#: scheme -> (module, class, extra that provides its driver or None)
_SCHEMES: dict[str, tuple[str, str, str | None]] = {
    "sqlite": ("tickwork.scheduler.backends.sqlite", "SQLiteBackend", None),
    "redis": ("tickwork.scheduler.backends.redis", "RedisBackend", "redis"),
    "rediss": ("tickwork.scheduler.backends.redis", "RedisBackend", "redis"),
    "redis+cluster": ("tickwork.scheduler.backends.redis", "RedisBackend", "redis"),
    "rediss+cluster": ("tickwork.scheduler.backends.redis", "RedisBackend", "redis"),
    "cassandra": ("tickwork.scheduler.backends.cassandra", "CassandraBackend", "cassandra"),
    "postgresql": ("tickwork.scheduler.backends.postgres", "PostgresBackend", "postgres"),
    "postgres": ("tickwork.scheduler.backends.postgres", "PostgresBackend", "postgres"),
}

DEFAULT_URL = "sqlite:///tickwork.db"


def open_backend(url: str, clock: Clock | None = None) -> Backend:
    """Open the backend named by ``url`` (``sqlite:///file.db``, ``redis://host:6379/0``, ...)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _SCHEMES:
        known = ", ".join(sorted(_SCHEMES))
        raise ConfigurationError(
            f"unknown backend URL scheme {scheme!r} in {url!r}; known: {known}"
        )
    module_name, class_name, extra = _SCHEMES[scheme]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if extra is not None and err.name is not None and not err.name.startswith("tickwork"):
            raise ConfigurationError(
                f"the {scheme!r} backend needs the {extra!r} extra: pip install 'tickwork[{extra}]'"
            ) from err
        raise ConfigurationError(f"the {scheme!r} backend is not available: {err}") from err
    backend_class = getattr(module, class_name)
    backend: Backend = backend_class.from_url(url, clock=clock)
    return backend


__all__ = [
    "DEFAULT_URL",
    "AbortRequest",
    "Backend",
    "BatchRecord",
    "Claim",
    "ClaimBatch",
    "Envelope",
    "Failure",
    "LedgerEntry",
    "MemberOutcome",
    "OnConflict",
    "Outcome",
    "PoisonRecord",
    "QueueStats",
    "RateRequest",
    "SlotRequest",
    "State",
    "StoredMessage",
    "Waiter",
    "open_backend",
    "redacted",
    "sqlite_file",
]
