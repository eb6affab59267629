"""The role interfaces of the backend contract. A backend (``base.Backend``) composes one
implementation of each over a shared connection; each role has its own contract suite
in ``tests/contract/``. A new backend implements the core first (``Messages`` and
``Leases``, then ``QueueAdmin`` and ``PoisonStore``) and passes their contract, then the
others."""

from tickwork.scheduler.backends.roles.admin import Aborts, PoisonStore, QueueAdmin
from tickwork.scheduler.backends.roles.changes import Changes
from tickwork.scheduler.backends.roles.leases import Leases
from tickwork.scheduler.backends.roles.limits import Limits, Rates
from tickwork.scheduler.backends.roles.messages import Messages
from tickwork.scheduler.backends.roles.records import Batches, Ledger, Registry, Results

__all__ = [
    "Aborts",
    "Batches",
    "Changes",
    "Leases",
    "Ledger",
    "Limits",
    "Messages",
    "PoisonStore",
    "QueueAdmin",
    "Rates",
    "Registry",
    "Results",
]
