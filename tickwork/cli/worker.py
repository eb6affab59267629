"""``tickwork worker``: run a worker daemon."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import click

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    fail,
    pass_state,
)
from tickwork.logs import configure as configure_logs
from tickwork.workers import Worker, WorkerConfig
from tickwork.workers.pools.kinds import POOL_KINDS
from tickwork.workers.supervisor import Supervisor


def _default(field: str) -> Any:
    """``WorkerConfig``'s default for ``field``: the one place the defaults are written."""
    return WorkerConfig.model_fields[field].default


#: the app of a Django project (``--django``): importing it sets Django up
DJANGO_APP = "tickwork.django.current:app"


@click.command()
@click.option(
    "--django",
    "django_settings",
    metavar="SETTINGS",
    help="A Django project's settings module: Django is set up in every worker process "
    "and the app is the project's (tickwork.django); -A is then not needed.",
)
@click.option("-Q", "--queue", "queues", multiple=True, help="Queue to consume (repeatable).")
@click.option(
    "-c",
    "--concurrency",
    type=click.IntRange(min=1),
    default=_default("concurrency"),
    show_default=True,
    help="Sync handlers at once (threads or processes).",
)
@click.option(
    "--async-concurrency",
    type=click.IntRange(min=1),
    default=_default("async_concurrency"),
    show_default=True,
    help="async def handlers at once on the worker's event loop.",
)
@click.option(
    "--pool", type=click.Choice(sorted(POOL_KINDS)), default=_default("pool"), show_default=True
)
@click.option(
    "--all-threads",
    is_flag=True,
    help="Keep all -c threads of the thread pool taking work [by default, while fast "
    "handlers keep the process's core busy, fewer take work; they come back when "
    "handlers wait on I/O].",
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    help="Claims held beyond idle slots [follows the handlers' pace: 2 x concurrency "
    "for slow ones, up to 12 x (at least 100) for fast ones].",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=_default("batch_size"), show_default=True
)
@click.option(
    "--lookahead-ms",
    type=click.IntRange(min=0),
    default=_default("lookahead_ms"),
    show_default=True,
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=_default("grace_s"),
    show_default=True,
    help="Seconds running handlers get to finish on shutdown.",
)
@click.option(
    "--abort-grace",
    type=click.FloatRange(min=0),
    default=_default("abort_grace_s"),
    show_default=True,
    help="Seconds an aborted process-pool handler has to stop before its process is killed.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a run of a task without a time_limit of its own may take before it is "
    "stopped (TimeLimitExceeded) [default: no limit].",
)
@click.option(
    "--time-limit-grace",
    type=click.FloatRange(min=0),
    default=_default("time_limit_grace_s"),
    show_default=True,
    help="Seconds a handler past its time limit has to stop before its process is killed "
    "(--pool process) or it is abandoned and its thread replaced.",
)
@click.option(
    "--max-tasks-per-child",
    type=click.IntRange(min=1),
    help="--pool process: replace a child process after it ran N messages (a handler "
    "that leaks) [default: never].",
)
@click.option(
    "--max-memory-per-child",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MIB",
    help="--pool process: replace a child process once a message leaves it using more "
    "than MIB of resident memory [default: never].",
)
@click.option(
    "--max-memory",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MIB",
    help="Past MIB of resident memory the worker drains and exits with status 1, for its "
    "supervisor (systemd, Kubernetes, --processes) to restart it [default: no bound].",
)
@click.option(
    "--unknown-task-grace",
    type=click.FloatRange(min=0),
    default=_default("unknown_task_grace_s"),
    show_default=True,
    help="Seconds a message whose task this worker does not know (a rolling deploy) is "
    "given back for a worker that knows it before it is poisoned (0: at once).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve Prometheus metrics on http://HOST:PORT/metrics (0: any free port).",
)
@click.option(
    "--metrics-host",
    default=_default("metrics_host"),
    show_default=True,
    help="Address the metrics server listens on (0.0.0.0: every interface).",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes, run and restarted by this one (each with these options; "
    "with --metrics-port P, process i serves on P + i).",
)
@click.option("--duration", type=click.FloatRange(min=0), help="Stop gracefully after S seconds.")
@click.option("--burst", is_flag=True, help="Exit when nothing is due or running.")
@click.option(
    "--keep-undeclared",
    is_flag=True,
    help="Do not uninstall the periodic schedules (and subscriptions to events) of this "
    "app's modules that the code no longer declares.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object per line, with message id, task, key, attempt and lateness.",
)
@pass_state
@app_options
@clean_errors
def worker(
    state: State,
    django_settings: str | None,
    queues: tuple[str, ...],
    concurrency: int,
    async_concurrency: int,
    pool: str,
    all_threads: bool,
    prefetch: int | None,
    batch_size: int,
    lookahead_ms: int,
    grace: float,
    abort_grace: float,
    time_limit: float | None,
    time_limit_grace: float,
    max_tasks_per_child: int | None,
    max_memory_per_child: float | None,
    max_memory: float | None,
    unknown_task_grace: float,
    metrics_port: int | None,
    metrics_host: str,
    processes: int,
    duration: float | None,
    burst: bool,
    keep_undeclared: bool,
    log_level: str,
    log_format: str,
) -> None:
    """Run a worker daemon for the app in MODULE."""
    configure_logs(log_level, log_format)
    if django_settings is not None:
        # inherited by the worker processes of --processes, which import the same app
        os.environ["DJANGO_SETTINGS_MODULE"] = django_settings
        state.module = state.module or DJANGO_APP
    module = state.module
    if module is None:
        fail("-A/--app MODULE is required (or --django SETTINGS for a Django project)")
    if processes > 1:
        state.app()  # a module that cannot load fails here, not in N restart loops
        ctx = click.get_current_context()
        env = dict(os.environ, TICKWORK_APP=module)
        if state.backend is not None:
            env["TICKWORK_BACKEND"] = state.backend  # not in argv, where ps shows it
        supervisor = Supervisor(
            lambda index: child_command(ctx.command, ctx.params, index),
            processes,
            stop_timeout_s=grace + 30.0,
            env=env,
        )
        sys.exit(supervisor.run())
    app = state.app()
    if not queues:
        queues = tuple(sorted(app.registry.queues() or {"default"}))
    config = WorkerConfig(
        queues=queues,
        concurrency=concurrency,
        async_concurrency=async_concurrency,
        pool=pool,
        adaptive_threads=not all_threads,
        prefetch=prefetch,
        batch_size=batch_size,
        lookahead_ms=lookahead_ms,
        grace_s=grace,
        abort_grace_s=abort_grace,
        time_limit_s=time_limit,
        time_limit_grace_s=time_limit_grace,
        max_tasks_per_child=max_tasks_per_child,
        max_memory_per_child_mb=max_memory_per_child,
        max_memory_mb=max_memory,
        unknown_task_grace_s=unknown_task_grace,
        burst=burst,
        reconcile_periodic=not keep_undeclared,
        app_reference=module,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
    )
    runner = Worker(app, config)
    runner.run(duration)
    app.close()
    if runner.forced:
        os._exit(1)  # running handlers were abandoned: do not wait for their threads
    if runner.failed is not None:
        sys.exit(1)  # a thread failed, or over --max-memory (logged): a supervisor restarts it


def child_command(command: click.Command, params: Mapping[str, Any], index: int) -> list[str]:
    """The command line of worker process ``index`` of a supervisor: ``command`` (this
    one) with the values it was given (``params``), each option by its long flag, except
    ``--processes``; the metrics port, when one is set, is its own (port + index)."""
    argv = [sys.executable, "-m", "tickwork", command.name or "worker"]
    for option in command.params:
        if not isinstance(option, click.Option) or option.name in (None, "processes"):
            continue
        value = params.get(option.name)
        if option.name == "metrics_port" and value:
            value += index
        flag = max(option.opts, key=len)
        if option.is_flag:
            argv += [flag] if value else []
        elif value is not None:
            for item in value if option.multiple else (value,):
                argv += [flag, str(item)]
    return argv
