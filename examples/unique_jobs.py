"""Unique windows: after a keyed job succeeds, the same key cannot be enqueued again for a
while (Sidekiq Enterprise's ``unique_for``).

python -m examples.unique_jobs                          # enqueues "sync acct:42" once
tickwork worker -A examples.unique_jobs --duration 2    # runs it; the key stays taken
python -m examples.unique_jobs                          # "ignored": within the window
# after 30 s the window closes on its own; the next enqueue runs again

Enqueue with ``on_conflict="ignore"`` (the outcome says ``ignored``) or the default
``"error"`` (a ``KeyConflict``). Only a success opens the window: a run that fails for
good leaves the key free. During the window ``tickwork show --key acct:42`` shows the
holder, with the header ``tickwork-unique-until``.
"""

from __future__ import annotations

from datetime import timedelta

from tickwork import App, Call

app = App()


@app.task(unique_for=timedelta(seconds=30))
def sync_account(account: int) -> None:
    print(f"  -> synced account {account}", flush=True)


def main() -> None:
    report = app.enqueue_many([Call(sync_account.name, (42,), key="acct:42")], "ignore")
    (outcome,) = report.outcomes
    print("sync acct:42:", outcome.value)
    app.close()


if __name__ == "__main__":
    main()
