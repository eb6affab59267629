"""Steering a schedule at run time: pause it, run it once by hand, resume it.

python -m examples.schedule_control          # installs "digest" every 2 s, then pauses it
tickwork schedules                           # digest ... paused
tickwork worker -A examples.schedule_control --duration 3    # runs nothing of it
tickwork schedules trigger digest            # one run now, the grid does not move
tickwork schedules resume digest             # what fell in the pause is skipped
tickwork worker -A examples.schedule_control --duration 5    # it runs every 2 s again

``resume --misfire coalesce`` runs what fell in the pause once, now; ``--misfire
catch_up --limit 10 --spacing 30`` runs each missed occurrence (at most 10, 30 s apart),
each as a one-off message headed ``tickwork-origin: catch-up``. A paused schedule is
stored (every worker sees it, restarts included) and can still be read, replaced,
cancelled and previewed by its key.
"""

from __future__ import annotations

from datetime import timedelta

from tickwork import App, Repeating, current_run

app = App()


@app.task
def digest(team: str) -> None:
    origin = "scheduled"
    if current_run().key is None:  # a manual or caught-up run is a one-off message
        origin = "one-off"
    print(f"  -> digest for {team} ({origin})", flush=True)


def main() -> None:
    digest.schedule(
        args=("platform",),
        trigger=Repeating(interval=timedelta(seconds=2)),
        key="digest",
        on_conflict="replace",
    )
    print("paused:", app.schedules.pause("digest"))
    (info,) = app.schedules.list()
    print(f"{info.key}: paused since {info.paused_at:%H:%M:%S}, next {info.next_run:%H:%M:%S}")
    app.close()


if __name__ == "__main__":
    main()
