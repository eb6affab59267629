"""Events: what a subscribed task receives (``Event``), a workflow step that waits for one
(``wait_for``, and ``EVENT``, the argument that stands for the event that came)."""

from tickwork.scheduler.events.names import Event
from tickwork.scheduler.events.waits import WaitTimedOut, wait_for
from tickwork.scheduler.events.workflows import EVENT

__all__ = ["EVENT", "Event", "WaitTimedOut", "wait_for"]
