"""What an isolated app's runs came to (``Drained``, ``RunFailedInline``) and the hooks that
watch it: ``Recorder`` keeps every body the app writes, ``Outcomes`` every settled run."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

from tickwork.scheduler.backends.records import Failure
from tickwork.scheduler.hooks import Hook
from tickwork.scheduler.model.handles import TaskFailed
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.scheduler.runs.context import RunInfo


@dataclass
class Drained:
    """What one ``drain`` ran: how many runs ended each way, and each run."""

    outcomes: Counter[str] = field(default_factory=Counter)
    runs: list[tuple[RunInfo, str]] = field(default_factory=list)
    #: why each run that went to the poison queue failed
    failures: list[tuple[RunInfo, Failure]] = field(default_factory=list)
    #: the delay of each retry scheduled
    retry_delays_s: list[float] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return self.outcomes["succeeded"]

    @property
    def retried(self) -> int:
        return self.outcomes["retried"]

    @property
    def poisoned(self) -> int:
        return self.outcomes["poisoned"]

    @property
    def aborted(self) -> int:
        return self.outcomes["aborted"]

    def of(self, task: TaskFunction[..., Any] | str) -> list[str]:
        """The outcomes of ``task``'s runs, in the order they were settled."""
        name = task if isinstance(task, str) else task.name
        return [outcome for run, outcome in self.runs if run.task == name]

    def add(self, other: Drained) -> None:
        self.outcomes.update(other.outcomes)
        self.runs += other.runs
        self.failures += other.failures
        self.retry_delays_s += other.retry_delays_s


class RunFailedInline(TaskFailed):
    """A task run inline failed for good (it went to the poison queue, as a worker would
    have put it): a ``tickwork.TaskFailed`` whose ``failure`` says why and ``run`` which
    message it was."""

    def __init__(self, run: RunInfo, failure: Failure) -> None:
        super().__init__(run.message_id, failure.error_type, failure.message)
        self.args = (
            f"{run.task} (message {run.message_id}) failed for good after {run.attempt} "
            f"attempt(s): {failure.error_type}: {failure.message}",
        )
        self.run = run
        self.failure = failure


class Recorder(Hook):
    """Every body the app writes (enqueues, next occurrences, chain steps), as written:
    ``enqueued`` keeps those still stored. An identity codec: bodies are unchanged."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}  # message id -> body, in the order written
        self._lock = threading.Lock()

    def encode_body(self, body: bytes) -> bytes:
        message_id = from_json(body).get("id")
        if isinstance(message_id, str):
            with self._lock:
                self.bodies.pop(message_id, None)
                self.bodies[message_id] = body
        return body


class Outcomes(Hook):
    def __init__(self) -> None:
        self.drained: Drained | None = None
        self._lock = threading.Lock()

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.outcomes[outcome] += 1
                self.drained.runs.append((run, outcome))

    def on_retry(self, run: RunInfo, error: str, delay_s: float) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.retry_delays_s.append(delay_s)

    def on_poison(self, run: RunInfo, failure: Failure) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.failures.append((run, failure))
