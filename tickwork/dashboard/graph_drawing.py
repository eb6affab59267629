"""The drawing of a graph on the workflow page: an SVG laid out level by level (a
step's column is its depth, ``scheduler.workflows.graph_view.levels``), each step a box
coloured by its state with its attempts and timing in its tooltip, each edge a line
from a parent to its child. Drawn on the server: no script, and a graph of a thousand
steps is a page that scrolls."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.scheduler.workflows.graph_view import levels
from tickwork.scheduler.workflows.view import WorkflowView

BOX_W, BOX_H = 120, 30
GAP_X, GAP_Y = 48, 12
MARGIN = 8


@dataclass(frozen=True, slots=True)
class Box:
    """A step: where it is drawn, its state (its class) and what it shows."""

    name: str
    x: int
    y: int
    state: str
    label: str
    tooltip: str


@dataclass(frozen=True, slots=True)
class Line:
    """An edge, from a parent's right side to its child's left side."""

    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True, slots=True)
class Drawing:
    """The whole picture: its size, boxes and lines."""

    width: int
    height: int
    boxes: list[Box]
    lines: list[Line]


def drawing(view: WorkflowView) -> Drawing:
    """The graph of ``view`` laid out for the page."""
    depth = levels(view)
    rows: dict[int, int] = {}
    places: dict[str, tuple[int, int]] = {}
    boxes = []
    for step in view.steps:
        column = depth[step.name]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = MARGIN + column * (BOX_W + GAP_X)
        y = MARGIN + row * (BOX_H + GAP_Y)
        places[step.name] = (x, y)
        facts = [step.name, *step.facts()]
        state = step.state.split(", ")[-1]  # "replayed, ready" is drawn as ready
        boxes.append(Box(step.name, x, y, state, step.name[:16], "\n".join(facts)))
    lines = []
    for step in view.steps:
        x2, y2 = places[step.name]
        for parent in step.after:
            x1, y1 = places[parent]
            lines.append(Line(x1 + BOX_W, y1 + BOX_H // 2, x2, y2 + BOX_H // 2))
    width = MARGIN * 2 + (max(rows, default=0) + 1) * (BOX_W + GAP_X)
    height = MARGIN * 2 + max(rows.values(), default=1) * (BOX_H + GAP_Y)
    return Drawing(width, height, boxes, lines)
