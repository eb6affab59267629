"""How a worker consumes: one typed, frozen configuration."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tickwork.workers.pools.kinds import POOL_KINDS


class WorkerConfig(BaseModel):
    """How a worker consumes. Defaults suit I/O-bound handlers on a small machine.

    ``pool`` names a kind in ``workers.pools.POOL_KINDS`` ("thread" or "process").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    queues: tuple[str, ...] = ("default",)
    concurrency: int = Field(default=8, ge=1)
    #: ``async def`` handlers running at once on the worker's event loop (only when the app
    #: has async tasks; their permits are added to the sync pool's)
    async_concurrency: int = Field(default=100, ge=1)
    pool: str = "thread"
    #: the thread pool lets fewer of its threads take work while fast handlers keep the
    #: process's core busy (``workers/pools/thread_tuning.py``); False: all of them always
    adaptive_threads: bool = True
    prefetch: int | None = Field(default=None, ge=0)  # default: follows the pace (Pace)
    batch_size: int = Field(default=100, ge=1)
    lookahead_ms: int = Field(default=500, ge=0)
    poll_interval_s: float = Field(default=1.0, gt=0)
    grace_s: float = Field(default=30.0, ge=0)
    #: how often a worker holding work reads abort requests (s)
    abort_check_s: float = Field(default=0.5, gt=0)
    #: how long an aborted process-pool handler has to stop before its process is killed
    abort_grace_s: float = Field(default=10.0, ge=0)
    #: the time limit of tasks that set none of their own (s; None: no limit)
    time_limit_s: float | None = Field(default=None, gt=0)
    #: how long a handler past its time limit has to stop, once told, before its process
    #: is killed (process pool) or it is abandoned and its thread replaced (thread pool)
    time_limit_grace_s: float = Field(default=5.0, ge=0)
    #: the process pool replaces a child after it ran this many messages (None: never)
    max_tasks_per_child: int | None = Field(default=None, ge=1)
    #: ... or once a message leaves it using more resident memory than this (MiB)
    max_memory_per_child_mb: float | None = Field(default=None, gt=0)
    #: past this resident memory (MiB) the worker drains and exits with status 1, for its
    #: supervisor to restart it (None: no bound)
    max_memory_mb: float | None = Field(default=None, gt=0)
    #: how long a message whose task this worker does not know is given back for a worker
    #: that knows it (a rolling deploy) before it is poisoned, from its time (s; 0: at once)
    unknown_task_grace_s: float = Field(default=900.0, ge=0)
    #: how often the worker refreshes its record in the worker registry (s)
    registry_interval_s: float = Field(default=5.0, gt=0)
    #: how often the worker appends what it did to each queue's activity log, the data of
    #: the dashboard's charts (s; 0: never)
    activity_interval_s: float = Field(default=15.0, ge=0)
    #: publish each run's start and end for live streams (``GET /api/v1/stream``), the
    #: changes of this long (s) together; 0: publish none
    live_changes_s: float = Field(default=0.02, ge=0)
    #: serve Prometheus metrics on this port (0: any free port; None: not at all)
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    #: the metrics port's ``/healthz`` (and systemd's watchdog) says the worker is not alive
    #: once its heartbeat thread, which keeps held leases, has not turned for this long (s)
    health_stale_s: float = Field(default=60.0, gt=0)
    burst: bool = False
    timer_capacity: int = Field(default=10_000, ge=0)  # claims parked in the wheel, at most
    #: at start, install the app's ``@app.periodic`` schedules and its subscriptions to
    #: events (``app.events.install``)
    install_periodic: bool = True
    #: at start, uninstall the periodic schedules and the subscriptions this app owns that
    #: its code no longer declares (``app.schedules.reconcile``)
    reconcile_periodic: bool = True
    app_reference: str | None = None  # "module" or "module:app", needed by the process pool

    @field_validator("pool")
    @classmethod
    def _known_pool(cls, kind: str) -> str:
        if kind not in POOL_KINDS:
            raise ValueError(f"unknown pool kind {kind!r}; known: {', '.join(sorted(POOL_KINDS))}")
        return kind

    @property
    def permits(self) -> int:
        return self.concurrency + (2 * self.concurrency if self.prefetch is None else self.prefetch)
