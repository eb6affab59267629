"""Testing code that enqueues: an app isolated on a fresh backend, drained in-process,
with assertions that say what *was* enqueued.

::

    from tickwork.testing import isolated, run_task

    def test_signup_sends_a_welcome_mail() -> None:
        with isolated(app) as tw:          # a fresh SQLite file on a clock the test moves
            signup("ada@example.com")      # code under test: calls send_welcome.delay(...)
            tw.assert_enqueued(send_welcome, args=["ada@example.com"])
            done = tw.drain()              # run what is due, chains and callbacks included
            assert done.succeeded == 1

    def test_send_welcome_renders() -> None:
        assert run_task(send_welcome, "ada@example.com") == "sent"

Everything goes through the same path as production: arguments validated against the
task's signature and encoded to JSON at enqueue, decoded by a real worker (a burst
worker in the test's process), results and retries by the task's options. The pytest
fixture ``tickwork_isolated`` (``tickwork.pytest_plugin``, registered when tickwork is
installed) does the same for a test and restores the app after it.
"""

from tickwork.testing.isolated import Isolated, IsolateFixture, isolated
from tickwork.testing.outcomes import Drained, RunFailedInline
from tickwork.testing.running import run_task

__all__ = ["Drained", "IsolateFixture", "Isolated", "RunFailedInline", "isolated", "run_task"]
