"""What a graph step raises to be skipped rather than succeed or fail.

``raise Skip("nothing new")`` in a step's handler: the step is recorded ``skipped`` (not
run, counted done), and the steps after it follow their trigger rule as they do after a
failure handler that had nothing to handle: a step with the default rule is skipped too,
one with ``"all_done"``, ``"none_failed"`` or ``"one_succeeded"`` counts the skipped
parent as done (its result ``None``). A condition on a step (``after(..., condition=)``)
skips it the same way without running it. Outside a graph, ``Skip`` ends the run as done
with no result (``None``), and nothing else.
"""

from __future__ import annotations

#: the rule a skipped run's result carries (``HandlerResult.rule`` of an acked run)
SKIPPED = "skipped"


class Skip(Exception):
    """Raise it in a handler to skip its graph step (``reason`` is logged)."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "skipped")
