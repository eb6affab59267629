"""The limits a registry declares, as the limits page lists them (no backend)."""

from __future__ import annotations

from tickwork.scheduler import App, ConcurrencyLimit
from tickwork.scheduler.limits.view import DeclaredLimit, declared_limits, merged


def test_limits_are_listed_once_with_every_task_that_uses_them() -> None:
    app = App("sqlite:///unused.db")
    crm = ConcurrencyLimit(name="crm", capacity=5)

    @app.task(concurrency_limit=crm)
    def push() -> None: ...

    @app.task(concurrency_limit=crm, rate_limit="10/30s", limit_key="account")
    def pull(account: str) -> None: ...

    @app.task
    def free() -> None: ...

    limits = declared_limits(app.registry)
    assert [(d.kind, d.name, d.amount, d.per_key) for d in limits] == [
        ("concurrency", "crm", 5, True),
        ("rate", pull.name, 10, True),
    ]
    assert limits[0].tasks == tuple(sorted((push.name, pull.name)))
    assert limits[1].period_s == 30.0


def test_merging_keeps_the_first_figures_and_joins_the_tasks() -> None:
    one = DeclaredLimit(name="x", kind="rate", amount=3, period_s=1.0, tasks=("a",))
    other = DeclaredLimit(name="x", kind="rate", amount=9, period_s=1.0, tasks=("b",))
    (only,) = merged([one, other])
    assert only.amount == 3 and only.tasks == ("a", "b")
