"""The gate the crash tests open round by round, so that a kill lands while work still
runs whatever the machine's speed: a task body calls ``pass_gate()`` before it records
its run in TICKWORK_TEST_DONE, and waits while that file holds as many lines as the
number in TICKWORK_TEST_GATE allows (no gate file: open)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def pass_gate() -> None:
    """Wait until the gate lets one more recorded run through (at once when ungated)."""
    gate = os.environ.get("TICKWORK_TEST_GATE")
    if gate is None:
        return
    done = Path(os.environ["TICKWORK_TEST_DONE"])
    while (allowed := _allowed(Path(gate))) is not None and recorded(done) >= allowed:
        time.sleep(0.01)


def hold_at_quota() -> None:
    """After a body recorded its run: if it was the last one the gate lets through,
    wait until the gate moves, so that a kill in that round may land after a body's
    record and before the worker notes that the body returned (at once when ungated)."""
    gate = os.environ.get("TICKWORK_TEST_GATE")
    if gate is None:
        return
    allowed = _allowed(Path(gate))
    if allowed is None or recorded(Path(os.environ["TICKWORK_TEST_DONE"])) != allowed:
        return
    while _allowed(Path(gate)) == allowed:
        time.sleep(0.01)


def open_gate(gate: Path, allowed: int | None) -> None:
    """Let ``allowed`` recorded runs through in all (``None``: every one)."""
    if allowed is None:
        gate.unlink(missing_ok=True)
        return
    staged = gate.with_suffix(".new")
    staged.write_text(str(allowed))
    staged.replace(gate)  # atomic: a body never reads half a number


def _allowed(gate: Path) -> int | None:
    try:
        return int(gate.read_text())
    except FileNotFoundError:
        return None


def recorded(done: Path) -> int:
    """How many runs ``done`` records (reruns included): what the gate counts."""
    try:
        with done.open("rb") as lines:
            return sum(1 for _ in lines)
    except FileNotFoundError:
        return 0
