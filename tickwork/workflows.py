"""Workflows: ``chain``, ``group``, ``batch`` and ``graph`` (with ``after``; a ``Graph``)
build them (the four are also in ``tickwork``; each has ``.delay()``); their handles
(``ChainHandle``, ``BatchHandle``, ``GraphHandle``, all a ``WorkflowHandle`` with
``result()``) and outcomes, and ``step_id``, the id of a chain's step; ``BatchedCall``,
one call of a task with ``batch_size`` as its handler gets it."""

from tickwork.scheduler.model.batching import BatchedCall
from tickwork.scheduler.model.handles import ChainHandle, WorkflowHandle
from tickwork.scheduler.model.shapes import batch, group
from tickwork.scheduler.producing.chains import chain, step_id
from tickwork.scheduler.workflows.graph_view import GraphHandle
from tickwork.scheduler.workflows.graphs import Graph, after, graph
from tickwork.scheduler.workflows.status import BatchHandle, BatchOutcome, BatchStatus

__all__ = [
    "BatchHandle",
    "BatchOutcome",
    "BatchStatus",
    "BatchedCall",
    "ChainHandle",
    "Graph",
    "GraphHandle",
    "WorkflowHandle",
    "after",
    "batch",
    "chain",
    "graph",
    "group",
    "step_id",
]
