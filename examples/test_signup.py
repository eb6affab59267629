"""Testing code that enqueues, with ``tickwork.testing`` and its pytest fixture (no
conftest needed: installing tickwork registers the plugin).

pytest examples/test_signup.py
"""

from __future__ import annotations

from datetime import timedelta

from examples.signup import app, send_mail, sent, sign_up
from tickwork.testing import IsolateFixture, run_task


def test_sign_up_enqueues_a_welcome_now_and_a_follow_up_tomorrow(
    tickwork_isolated: IsolateFixture,
) -> None:
    tw = tickwork_isolated(app)  # a fresh SQLite file on a clock the test moves
    sign_up("ada@example.com")
    tw.assert_enqueued(send_mail, args=["ada@example.com", "welcome"])
    tw.assert_enqueued(send_mail, key="follow:ada@example.com")
    assert tw.drain().succeeded == 1, "the welcome runs now"
    tw.refute_enqueued(send_mail, args=["ada@example.com", "welcome"])
    assert tw.drain(advance=timedelta(days=1)).succeeded == 1, "the follow-up a day later"
    assert sent[-2:] == ["welcome:ada@example.com", "follow-up:ada@example.com"]


def test_the_mail_task_itself() -> None:
    assert run_task(send_mail, "bob@example.com", "welcome") == "sent welcome to bob@example.com"
