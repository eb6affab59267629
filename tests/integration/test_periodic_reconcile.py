"""Reconciliation, on every backend: a worker of an app uninstalls the periodic schedules
installed from its tasks' modules that its code no longer declares (recorded in their
action logs), and leaves alone those of other modules, schedules not installed from
``@app.periodic``, and everything when told to keep them."""

from __future__ import annotations

from tests.support.helpers import running
from tickwork.scheduler import App, Settings
from tickwork.triggers import Cron

HOURLY = Cron("0 0 1 1 *")  # yearly: nothing of it comes due while the test runs
MODULE = "tests.integration.test_periodic_reconcile"


def _app(url: str) -> App:
    return App(settings=Settings.load(backend=url))


def test_a_periodic_the_code_no_longer_declares_is_uninstalled(app: App) -> None:
    url = app.settings.backend
    before = _app(url)

    @before.periodic(HOURLY, key="report", name=f"{MODULE}.report")
    def report() -> None: ...

    @before.periodic(HOURLY, key="cleanup", name=f"{MODULE}.cleanup")
    def cleanup() -> None: ...

    @before.periodic(HOURLY, key="elsewhere", name="other_module.job")
    def job() -> None: ...

    @before.task(name=f"{MODULE}.manual")
    def manual() -> None: ...

    before.schedules.install(before.periodics)
    manual.schedule(trigger=HOURLY, key="by-hand")  # not from @app.periodic
    before.close()

    after = _app(url)  # the next deploy: cleanup is gone from the code

    @after.periodic(HOURLY, key="report", name=f"{MODULE}.report")
    def report_again() -> None: ...

    kept = _app(url)

    @kept.periodic(HOURLY, key="report", name=f"{MODULE}.report")
    def report_kept() -> None: ...

    with running(kept, reconcile_periodic=False):
        pass
    assert kept.get(key="cleanup") is not None, "kept when told to"
    kept.close()
    with running(after):
        pass
    assert after.get(key="cleanup") is None, "uninstalled by the worker's start"
    assert after.get(key="report") is not None
    assert after.get(key="elsewhere") is not None, "another module's: not this app's to remove"
    assert after.get(key="by-hand") is not None, "not installed from @app.periodic"
    (action,) = after.schedules.actions("cleanup")
    assert (action.action, action.actor) == ("uninstall", "tickwork")
    assert "no longer declares" in (action.note or "")
    assert after.schedules.reconcile(after.periodics) == [], "nothing left to do"
    after.close()
