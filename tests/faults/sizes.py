"""How big the fault tests are: small in ``make test`` (every crash test on every backend,
seconds each), full in ``make faults`` (``TICKWORK_FAULTS_FULL=1``)."""

from __future__ import annotations

import os

FULL = os.environ.get("TICKWORK_FAULTS_FULL") == "1"


def sized(full: int, small: int) -> int:
    """``full`` under ``make faults``, else ``small``."""
    return full if FULL else small
