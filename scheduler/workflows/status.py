"""Reading a batch back: its status and members (``app.batch``, ``tickwork workflow
show``), the outcome its callbacks take, and the handle ``app.enqueue(batch(...))``
returns (see ``scheduler.workflows.batches`` for how a batch runs)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypedDict  # pydantic validates a task argument typed with it (3.11)

from tickwork.scheduler.backends import Backend, BatchRecord
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import BatchNotFound, TickworkError
from tickwork.scheduler.model.handles import IdHandle, ResultTimeout
from tickwork.scheduler.model.shapes import When
from tickwork.scheduler.runs.results import ResultRecord
from tickwork.scheduler.workflows.batches import BatchDescription, member_id
from tickwork.scheduler.workflows.graph_records import is_graph_id
from tickwork.scheduler.workflows.graph_records import read_description as read_graph


class BatchFailed(TickworkError):
    """Raised by ``BatchHandle.results()`` when a member failed for good."""

    def __init__(self, batch_id: str, failures: list[Failure]) -> None:
        first = failures[0]
        super().__init__(
            f"batch {batch_id}: {len(failures)} member(s) failed, the first "
            f"({first['id']}): {first['error_type']}: {first['error']}"
        )
        self.batch_id = batch_id
        self.failures = failures


class Failure(TypedDict):
    """A member that failed for good, as callbacks and ``BatchFailed`` see it."""

    index: int
    id: str
    error_type: str
    error: str


class BatchOutcome(TypedDict):
    """What ``on_complete`` and ``on_failure`` callbacks made with ``.s()`` take first:
    counts, each member's result in order (None for a failed one), and the failures."""

    batch: str
    size: int
    succeeded: int
    failed: int
    results: list[Any]
    failures: list[Failure]


class MemberState(BaseModel):
    """One member of a batch: settled (succeeded or failed) or still pending."""

    model_config = ConfigDict(frozen=True)

    index: int
    id: str
    status: Literal["pending", "succeeded", "failed"]
    value: Any = None
    error_type: str | None = None
    error: str | None = None
    attempt: int = 0
    settled_at: datetime | None = None


class BatchStatus(BaseModel):
    """Where a batch stands."""

    model_config = ConfigDict(frozen=True)

    id: str
    size: int
    settled: int
    failed: int
    created_at: datetime | None
    callbacks: dict[When, str]  # when -> the callback's message id
    members: list[MemberState] = []

    @property
    def succeeded(self) -> int:
        return self.settled - self.failed

    @property
    def complete(self) -> bool:
        """Every member settled (the callbacks that apply have been woken)."""
        return self.settled >= self.size


def read_description(
    backend: Backend, batch_id: str, outcomes: bool = False
) -> tuple[BatchDescription, BatchRecord]:
    """The batch's description and stored record; ``BatchNotFound``."""
    record = backend.batches.read(batch_id, outcomes=outcomes)
    if record is None:
        raise BatchNotFound(f"no batch {batch_id} is stored (a wrong id, or it expired)")
    if record.description is None:
        raise BatchNotFound(f"batch {batch_id}'s description expired: its records are gone")
    try:
        return BatchDescription.decode(record.description), record
    except ValidationError as err:
        raise TickworkError(f"batch {batch_id} has an unreadable description: {err}") from err


def read_status(backend: Backend, batch_id: str, members: bool = False) -> BatchStatus:
    """The batch's counts (and each member's state if ``members``); ``BatchNotFound``."""
    if is_graph_id(batch_id):
        return _graph_status(backend, batch_id, members)
    description, record = read_description(backend, batch_id, members)
    states = (
        [_member(batch_id, i, record.outcomes.get(i)) for i in range(description.size)]
        if members
        else []  # a handle's wait polls the counts: no 10,000 member objects each time
    )
    return BatchStatus(
        id=batch_id,
        size=description.size,
        settled=record.settled,
        failed=record.failed,
        created_at=to_datetime(description.created_ms),
        callbacks={when: place.id for when, place in description.callbacks.items()},
        members=states,
    )


def _member(batch_id: str, index: int, outcome: bytes | None) -> MemberState:
    mid = member_id(batch_id, index)
    if outcome is None:
        return MemberState(index=index, id=mid, status="pending")
    return _member_state(index, mid, outcome)


def _member_state(index: int, mid: str, outcome: bytes) -> MemberState:
    """A settled member from its outcome record."""
    record = ResultRecord.decode(outcome)
    return MemberState(
        index=index,
        id=mid,
        status="succeeded" if record.status == "succeeded" else "failed",
        value=record.value,
        error_type=record.error_type,
        error=record.error,
        attempt=record.attempt,
        settled_at=to_datetime(record.at_ms) if record.at_ms else None,
    )


def _graph_status(backend: Backend, graph_id: str, members: bool) -> BatchStatus:
    """A group or batch that runs as a graph, as a batch: member ``i`` succeeded when its
    last step did (its result is that step's), failed when one of its steps failed for
    good (and was not replayed since), else pending."""
    found = read_graph(backend, graph_id, outcomes=True)
    if found is None:
        raise BatchNotFound(f"no batch {graph_id} is stored (a wrong id, or it expired)")
    description, record = found
    index = {step.name: i for i, step in enumerate(description.steps)}
    ids = {step.name: step.id for step in description.steps}
    states = []
    for position, names in enumerate(description.members):
        last = 2 * index[names[-1]]
        failed = [
            record.outcomes[2 * index[name] + 1]
            for name in names
            if 2 * index[name] + 1 in record.outcomes and 2 * index[name] not in record.outcomes
        ]
        if last in record.outcomes:
            states.append(_member_state(position, ids[names[-1]], record.outcomes[last]))
        elif failed:
            states.append(_member_state(position, ids[names[-1]], failed[0]))
        else:
            states.append(MemberState(index=position, id=ids[names[-1]], status="pending"))
    settled = sum(state.status != "pending" for state in states)
    return BatchStatus(
        id=graph_id,
        size=len(description.members),
        settled=settled,
        failed=sum(state.status == "failed" for state in states),
        created_at=to_datetime(description.created_ms),
        callbacks={when: ids[name] for when, name in description.callbacks.items()},
        members=states if members else [],
    )


def outcome_of(status: BatchStatus) -> BatchOutcome:
    """The outcome of a settled batch read with its members."""
    failures: list[Failure] = [
        {"index": m.index, "id": m.id, "error_type": m.error_type or "", "error": m.error or ""}
        for m in status.members
        if m.status == "failed"
    ]
    return {
        "batch": status.id,
        "size": status.size,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "results": [m.value for m in status.members],
        "failures": failures,
    }


def callback_argument(backend: Backend, batch_id: str, when: When) -> Any:
    """What a callback made with ``.s()`` takes first, read now: ``on_success`` the list of
    results in member order, the others the ``BatchOutcome``."""
    outcome = outcome_of(read_status(backend, batch_id, members=True))
    return outcome["results"] if when == "success" else outcome


class BatchReader(Protocol):
    """What a batch handle reads through (an ``App``)."""

    @property
    def backend(self) -> Backend: ...


class BatchHandle(IdHandle):
    """The id of an enqueued batch (a ``str``), and what its caller can ask of it."""

    _app: BatchReader

    def __new__(cls, batch_id: str, app: BatchReader) -> BatchHandle:
        handle = super().__new__(cls, batch_id)
        handle._app = app
        return handle

    def status(self, members: bool = False) -> BatchStatus:
        """The batch's counts (and each member's state), read now."""
        return read_status(self._app.backend, str(self), members)

    def member_ids(self) -> list[str]:
        """The message ids of the members, in order."""
        return [member_id(str(self), i) for i in range(self.status().size)]

    def wait(self, timeout: float | None = None) -> BatchStatus:
        """Wait until every member settled; the status with members. ``ResultTimeout``
        after ``timeout`` seconds (None: as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.01
        while not (status := self.status()).complete:
            if deadline is not None and time.monotonic() + pause > deadline:
                raise ResultTimeout(
                    f"batch {self}: {status.settled} of {status.size} members settled "
                    f"within {timeout:g} s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.25)
        return self.status(members=True)

    def results(self, timeout: float | None = None) -> list[Any]:
        """Wait for every member; their results in order. ``BatchFailed`` if one failed."""
        outcome = outcome_of(self.wait(timeout))
        if outcome["failures"]:
            raise BatchFailed(str(self), outcome["failures"])
        return outcome["results"]

    def result(self, timeout: float | None = None) -> list[Any]:
        """``results``: the name every handle shares (``WorkflowHandle``)."""
        return self.results(timeout)

    async def aresult(self, timeout: float | None = None) -> list[Any]:
        """``results`` for code in an event loop (the waits run in a thread)."""
        return await asyncio.to_thread(self.results, timeout)
