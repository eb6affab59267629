"""Every header name a message may carry, in one place. Headers are a message's
``headers`` mapping (str -> str, stored in its body); tickwork's own start with
``tickwork-``, the W3C trace context keeps its standard name."""

#: the header that names the schedule a one-off run belongs to (a manual, caught-up or
#: backfilled run of it): its record goes to that schedule's ledger
SCHEDULE = "tickwork-schedule"

#: the header that says why a one-off run of a schedule exists (``manual``, ``catch-up``,
#: ``backfill``)
ORIGIN = "tickwork-origin"

#: the header that marks a unique window: a message that holds its key, never runs, and is
#: dropped when it comes due (the window's end, epoch ms)
UNIQUE_UNTIL = "tickwork-unique-until"

#: the header that gives a keyed one-off message its own unique window (ms), whatever its
#: task's ``unique_for``: a backfilled run keeps its key that long after it succeeded
UNIQUE_FOR = "tickwork-unique-for"

#: the producer's span (OpenTelemetry's W3C ``traceparent``), carried to the worker
TRACEPARENT = "traceparent"

#: on a schedule installed from ``@app.periodic``: the module of its task, which owns it
#: (a worker of an app with tasks in that module uninstalls it once the code no longer
#: declares it)
PERIODIC = "tickwork-periodic"

#: on an overlapping schedule's message (its ticker, ``scheduler.schedules.overlap``):
#: the ids of the last two runs it enqueued (space-separated, oldest first), which the
#: next occurrence buffers behind, aborts or kills, by its policy
LAST_RUN = "tickwork-last-run"

#: on a run of an overlapping schedule: the schedule's overlap policy (a run of
#: ``terminate_other`` is killed at once when the next occurrence aborts it)
OVERLAP = "tickwork-overlap"

#: on a child a durable run started (``spawn``): ``[queue, run id]`` of that run (JSON),
#: which the child's worker wakes once the child is acked or poisoned, so a parent waiting
#: in ``gather`` looks again at once (``workers/settling/parent_wake.py``)
PARENT = "tickwork-parent"
