"""Read, replace and cancel scheduled messages by key.

python -m examples.keys
"""

from __future__ import annotations

from datetime import timedelta

from tickwork import App, Repeating
from tickwork.errors import KeyConflict

app = App()


@app.task
def remind(user_id: int, text: str) -> None:
    print(f"  -> remind {user_id}: {text}", flush=True)


def main() -> None:
    key = "reminder:user-7"
    app.cancel(key=key)  # start clean
    remind.schedule(args=(7, "stand up"), delay=timedelta(hours=1), key=key)
    print("scheduled:", app.get(key=key))

    try:
        remind.schedule(args=(7, "sit down"), delay=timedelta(hours=1), key=key)
    except KeyConflict as err:
        print("conflict:", err)

    same = remind.schedule(args=(7, "ignored"), key=key, on_conflict="ignore")
    print("ignore keeps the first, id", same)

    hourly = Repeating(interval=timedelta(hours=1), repeat_count=3)
    remind.schedule(args=(7, "drink water"), trigger=hourly, key=key, on_conflict="replace")
    found = app.get(key=key)
    assert found is not None
    print("replaced:", found.message.kwargs or found.message.args, found.message.trigger)

    print("cancelled:", app.cancel(key=key), "| again:", app.cancel(key=key))
    app.close()


if __name__ == "__main__":
    main()
