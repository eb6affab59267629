"""A checker in the style of Jepsen's queue tests, for the crash-loop fault test: from what
was enqueued, what was cancelled and the log of runs, count what was lost, what ran that
should not have, what ran twice, and the fires of each recurring chain."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Verdict:
    """What one crash-loop run did to the messages it was given."""

    backend: str
    seconds: float
    kills: int
    enqueued: int  # one-off messages that must run (due now, delayed, keyed not cancelled)
    cancelled: int  # keyed messages cancelled before they were due: must not run
    lost: int = 0  # must run, never ran
    unexpected: int = 0  # ran, but was cancelled (or was never enqueued)
    duplicates: int = 0  # extra runs of one-off messages
    duplicate_bound: int = 0  # what the killed workers could hold at once, in all
    fires: dict[str, int] = field(default_factory=dict)  # runs of each recurring chain
    fired_twice: dict[str, int] = field(default_factory=dict)  # occurrences run twice
    after_last_kill: dict[str, int] = field(default_factory=dict)  # fires once kills ended
    lost_ids: list[int] = field(default_factory=list)
    unexpected_ids: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        repeats = sum(self.fired_twice.values())
        return (
            self.lost == 0
            and self.unexpected == 0
            and self.duplicates + repeats <= self.duplicate_bound
            and all(self.after_last_kill.get(name, 0) > 0 for name in self.fires)
        )

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def check(
    runs_file: Path,
    must_run: set[int],
    cancelled: set[int],
    chains: dict[str, str],
    verdict: Verdict,
) -> Verdict:
    """Fill ``verdict`` from the log: ``job N`` lines for one-offs (``must_run``,
    ``cancelled``), ``tick ID`` lines for recurring chains (``chains``: name -> the prefix
    of its message ids), and the ``kill N`` lines the test writes at each kill (a chain
    that survived every kill fires after the last one)."""
    jobs: Counter[int] = Counter()
    ticks: Counter[str] = Counter()
    since_kill: list[str] = []
    for line in runs_file.read_text().splitlines() if runs_file.exists() else []:
        kind, _, what = line.partition(" ")
        if kind == "job":
            jobs[int(what)] += 1
        elif kind == "tick":
            ticks[what] += 1
            since_kill.append(what)
        elif kind == "kill":
            since_kill = []
    lost = sorted(must_run - set(jobs))
    unexpected = sorted(str(n) for n in set(jobs) - must_run)
    verdict.lost, verdict.lost_ids = len(lost), lost[:20]
    verdict.unexpected, verdict.unexpected_ids = len(unexpected), unexpected[:20]
    verdict.duplicates = sum(count - 1 for n, count in jobs.items() if n in must_run)
    for name, prefix in chains.items():
        mine = {tick: count for tick, count in ticks.items() if tick.startswith(prefix)}
        verdict.fires[name] = len(mine)
        verdict.fired_twice[name] = sum(count - 1 for count in mine.values())
        verdict.after_last_kill[name] = sum(tick.startswith(prefix) for tick in since_kill)
    strays = [t for t in ticks if not any(t.startswith(p) for p in chains.values())]
    verdict.unexpected += len(strays)
    verdict.unexpected_ids += strays[:20]
    return verdict
