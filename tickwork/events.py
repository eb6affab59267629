"""Events: what a subscribed task receives (``Event``), a workflow step that waits for one
(``wait_for``, and ``EVENT``, the argument that stands for the event that came)."""

from tickwork.scheduler.events.waits import WaitTimedOut, wait_for
from tickwork.scheduler.events.workflows import EVENT
from tickwork.scheduler.model.event_names import Event

__all__ = ["EVENT", "Event", "WaitTimedOut", "wait_for"]
