"""``app.batches``: enqueue a batch or a group, read it, cancel it, and show a workflow
(a batch or a chain) step by step. How a batch runs is in ``scheduler.workflows.batches``; reading
it back in ``scheduler.workflows.status``."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, overload

from tickwork.scheduler.backends import OnConflict
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import BatchNotFound, WorkflowNotFound
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.shapes import Batch, Group, Sequenced
from tickwork.scheduler.producing.backpressure import write_bounded
from tickwork.scheduler.runs.tracing import producer_span
from tickwork.scheduler.workflows.batches import BuiltBatch, build_batch, member_id
from tickwork.scheduler.workflows.graph_records import (
    PARKED_MS,
    BuiltGraph,
    build_graph,
    cancel_graph,
    graph_of_anchor,
    is_graph_id,
)
from tickwork.scheduler.workflows.graph_schedules import is_graph_schedule, schedule_envelope
from tickwork.scheduler.workflows.graph_view import GraphHandle, graph_view
from tickwork.scheduler.workflows.graphs import Graph, Workflow, compile_spec, nests
from tickwork.scheduler.workflows.status import (
    BatchHandle,
    BatchStatus,
    read_description,
    read_status,
)
from tickwork.scheduler.workflows.view import WorkflowView, batch_view, chain_view, keyed_view

if TYPE_CHECKING:
    from tickwork.scheduler.backends import Backend
    from tickwork.scheduler.parts import AppParts

_CHUNK = 1000  # members written per backend call


class Batches:
    """The batches and workflows of an app's deployment."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts

    @property
    def backend(self) -> Backend:
        return self._parts.backend

    @overload
    def enqueue(
        self,
        spec: Batch | Group,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> BatchHandle: ...

    @overload
    def enqueue(
        self,
        spec: Graph | Sequenced,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> GraphHandle: ...

    def enqueue(
        self,
        spec: Workflow,
        *,
        block: bool = True,
        block_timeout: float | None = None,
        connection: Any = None,
    ) -> BatchHandle | GraphHandle:
        """Validate every member and callback, then store the batch: its description, its
        callbacks (parked until it settles), its members (``1000`` per call, waiting for
        room in a bounded queue as ``enqueue_many`` does). If the members cannot all be
        written (``QueueFull``, a backend error), the callbacks are deleted, so a batch
        that was not wholly stored never calls back; the error is raised. With
        ``connection`` (PostgreSQL), all of it is written inside that connection's open
        transaction (``App.transaction``): a rollback leaves nothing of the batch."""
        if connection is not None:
            with self.backend.transaction(connection):
                return self.enqueue(spec, block=block, block_timeout=block_timeout)
        with producer_span(f"enqueue {type(spec).__name__.lower()}") as sent:
            handle = self._enqueue_workflow(spec, block, block_timeout)
            sent(str(handle), None)
        return handle

    def _enqueue_workflow(
        self, spec: Workflow, block: bool, block_timeout: float | None
    ) -> BatchHandle | GraphHandle:
        if isinstance(spec, Graph | Sequenced):
            whole = spec if isinstance(spec, Graph) else compile_spec(spec)
            return self._enqueue_graph(whole, block, block_timeout)
        if nests(spec):  # read back as a batch: its members' last steps are its members
            return BatchHandle(self._enqueue_graph(compile_spec(spec), block, block_timeout), self)
        settings = self._parts.settings
        retention = timedelta(seconds=settings.batch_retention_s)
        built = build_batch(
            self._parts.builder, spec, self._parts.backend_clock.now_ms(), retention
        )
        backend = self.backend
        backend.batches.open(built.id, built.description.encode(), built.expires_ms)
        if built.callbacks:
            backend.messages.enqueue(built.callbacks, OnConflict.ERROR)
        timeout_s = settings.enqueue_block_s if block_timeout is None else block_timeout
        waited_s = 0.0
        try:
            for start in range(0, len(built.members), _CHUNK):
                chunk = built.members[start : start + _CHUNK]
                left = timeout_s - waited_s
                waited_s += write_bounded(
                    backend, chunk, OnConflict.ERROR, block=block, timeout_s=left
                )[1]
        except BaseException:
            self._drop_callbacks(built)
            raise
        return BatchHandle(built.id, self)

    def _enqueue_graph(self, spec: Graph, block: bool, block_timeout: float | None) -> GraphHandle:
        """Store a graph: its anchor (which holds its key, or raises ``KeyConflict``), its
        record, then its steps, parked ones first. If the steps cannot all be written,
        the graph is cancelled (none of it runs on) and the error raised."""
        settings = self._parts.settings
        now_ms = self._parts.backend_clock.now_ms()
        built = build_graph(
            self._parts.builder,
            spec,
            now_ms,
            timedelta(seconds=settings.batch_retention_s),
            settings.default_queue,
        )  # every step checked, for a scheduled graph too (its runs are built alike)
        backend = self.backend
        if spec.trigger is not None:  # its schedule holds its key and fires its runs
            schedule = schedule_envelope(
                spec, spec.queue or settings.default_queue, to_datetime(now_ms)
            )
            backend.messages.enqueue([schedule], OnConflict.ERROR)
            assert schedule.key is not None
            return GraphHandle(schedule.id, self, (schedule.queue, schedule.key))
        if built.anchor is not None:
            backend.messages.enqueue([built.anchor], OnConflict.ERROR)
        timeout_s = settings.enqueue_block_s if block_timeout is None else block_timeout
        self._write_graph(built, block, timeout_s)
        return GraphHandle(built.id, self)

    def start_run(self, spec: Graph, graph_id: str, due_ms: int) -> None:
        """Store one run of a scheduled graph (``spec`` without key or trigger), named
        ``graph_id``, its first steps due at ``due_ms`` (its occurrence's due time): what
        a worker does at each occurrence. Raises ``QueueFull`` at once (it does not wait
        for room) and what a backend raises, with nothing of the run left to go on."""
        settings = self._parts.settings
        built = build_graph(
            self._parts.builder,
            spec,
            self._parts.backend_clock.now_ms(),
            timedelta(seconds=settings.batch_retention_s),
            settings.default_queue,
            graph_id,
        )
        steps = [
            e if e.due_ms == PARKED_MS else e._replace(due_ms=max(e.due_ms, due_ms))
            for e in built.steps
        ]
        self._write_graph(replace(built, steps=steps), block=False, timeout_s=0.0)

    def _write_graph(self, built: BuiltGraph, block: bool, timeout_s: float) -> None:
        """Write a built graph's record, then its steps (``_CHUNK`` per call, waiting up to
        ``timeout_s`` for room in a bounded queue). If they cannot all be written, the
        graph is cancelled (none of it runs on), its anchor deleted, the error raised."""
        backend = self.backend
        try:
            backend.batches.open(built.id, built.description.encode(), built.expires_ms)
            waited_s = 0.0
            for start in range(0, len(built.steps), _CHUNK):
                chunk = built.steps[start : start + _CHUNK]
                waited_s += write_bounded(
                    backend, chunk, OnConflict.ERROR, block=block, timeout_s=timeout_s - waited_s
                )[1]
        except BaseException:
            cancel_graph(backend, built.id)
            if built.anchor is not None:
                backend.messages.delete(built.anchor.id, built.anchor.queue)
            raise

    def _drop_callbacks(self, built: BuiltBatch) -> None:
        for envelope in built.callbacks:
            self.backend.messages.delete(envelope.id, envelope.queue)

    def get(self, batch_id: str, members: bool = False) -> BatchStatus:
        """Where batch ``batch_id`` stands: counts, callbacks, and (``members``) each
        member's state, result or error. Raises ``BatchNotFound``."""
        return read_status(self.backend, batch_id, members)

    def cancel(self, batch_id: str) -> int:
        """Cancel a batch: its callbacks are deleted (none fires) and its members that
        have not settled are cancelled (running ones finish, as ``cancel`` lets them).
        Returns how many members were cancelled. Raises ``BatchNotFound``. A graph: every
        step not yet run is deleted, and none is woken after (``cancel_graph``)."""
        backend = self.backend
        if is_graph_id(batch_id):
            cancelled = cancel_graph(backend, batch_id)
            if cancelled is None:
                raise BatchNotFound(f"no graph {batch_id} is stored (a wrong id, or it expired)")
            return cancelled
        description, record = read_description(backend, batch_id, outcomes=True)
        for place in description.callbacks.values():
            backend.messages.delete(place.id, place.queue)
        cancelled = 0
        for index in range(description.size):
            if index not in record.outcomes:
                mid = member_id(batch_id, index)
                cancelled += any(
                    backend.messages.delete(mid, queue) for queue in description.queues
                )
        return cancelled

    def workflow(
        self,
        workflow_id: str | None = None,
        max_steps: int = 1000,
        *,
        key: str | None = None,
        queue: str | None = None,
    ) -> WorkflowView:
        """A batch or a graph (by its id) or a chain (by its first step's id), or what
        holds ``key`` in ``queue`` (a graph, or the live occurrence of a recurring chain),
        with each member, callback or step: state, attempts, timing, result or error.
        Raises ``WorkflowNotFound``."""
        backend = self.backend
        if key is not None:
            queue = queue or self._parts.settings.default_queue
            anchor = backend.messages.get_by_key(queue, key)
            graph_id = None if anchor is None else graph_of_anchor(anchor.envelope.body)
            if graph_id is not None:
                return self.workflow(graph_id)
            if anchor is not None and is_graph_schedule(Message.decode(anchor.envelope.body)):
                raise WorkflowNotFound(f"the graph scheduled under {key!r} has not run yet")
            keyed = keyed_view(backend, queue, key)
            if keyed is None:
                raise WorkflowNotFound(f"no chain holds the key {key!r}")
            return keyed
        if workflow_id is None:
            raise WorkflowNotFound("give a batch or chain id, or a key")
        if is_graph_id(workflow_id):
            view = graph_view(backend, workflow_id)
            if view is None:
                raise WorkflowNotFound(f"no graph {workflow_id} is stored (or it expired)")
            return view
        if backend.batches.read(workflow_id, outcomes=False) is not None:
            return batch_view(backend, workflow_id)
        found = chain_view(backend, workflow_id, max_steps)
        if found is None:
            raise WorkflowNotFound(f"no batch or chain {workflow_id} is stored")
        return found
