"""A sign-up that enqueues a welcome mail and a follow-up a day later: the app that
``examples/test_signup.py`` tests with ``tickwork.testing``.

python -m examples.signup
tickwork worker -A examples.signup --duration 2
pytest examples/test_signup.py
"""

from __future__ import annotations

from datetime import timedelta

from tickwork import App

app = App()
sent: list[str] = []


@app.task(retries=2)
def send_mail(email: str, template: str) -> str:
    sent.append(f"{template}:{email}")
    return f"sent {template} to {email}"


def sign_up(email: str) -> None:
    """What a web handler would do: save the user (left out here), then enqueue."""
    send_mail.delay(email, "welcome")
    send_mail.schedule(args=(email, "follow-up"), delay=timedelta(days=1), key=f"follow:{email}")


if __name__ == "__main__":
    sign_up("ada@example.com")
    print("enqueued the welcome mail and the follow-up")
    app.close()
