"""What the clock fault tests share: libfaketime (Debian's ``faketime``), installed when
missing, and the runs their workers record (``tests/support/skew_tasks.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.support.servers import ensure_debian_packages

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def libfaketime() -> str:
    """The path of libfaketime to preload into a worker, installed if missing."""
    if not Path(LIBFAKETIME).exists():
        ensure_debian_packages(["faketime"], ["faketime"])
    return LIBFAKETIME


def count_runs(runs: Path, kind: str) -> int:
    """How many runs of ``kind`` (``job``, ``tick``) the file ``runs`` records."""
    if not runs.exists():
        return 0
    return sum(line.startswith(f"{kind} ") for line in runs.read_text().splitlines())


def runners(runs: Path) -> set[int]:
    """The pids of the workers that ran something, as the file ``runs`` records."""
    if not runs.exists():
        return set()
    return {int(line.split()[4]) for line in runs.read_text().splitlines() if line.strip()}
