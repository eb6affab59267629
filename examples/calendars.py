"""Schedule specs and calendars: one schedule on several specs (each in its own timezone),
a named calendar stored once and shared by schedules (business hours, holidays, dates
off), a change of it that every schedule follows, and a catch-up bounded by time.

python -m examples.calendars   # prints each schedule's next runs, before and after the
                               # calendar changes, and the calendar's history
tickwork calendars set ops --window "MON-FRI 09:00-18:00" --holidays FR --note "office"
tickwork calendars show ops    # its rules, and the schedules that use it

The support desk's digest runs at 09:00 in Paris and at 09:00 in New York (two specs, one
schedule), and a health check runs every 90 minutes; both follow the calendar "desk":
office hours on weekdays, French public holidays off. A calendar's hours are wall times
in the zone of the schedule that uses it (``Specs(tz=...)``, ``Cron(tz=...)``; UTC for
``Repeating``). When a strike closes the office
for a day, the calendar is changed once and both schedules skip it.
"""

from __future__ import annotations

from datetime import time, timedelta

from tickwork import App, Cron, Misfire, Repeating
from tickwork.triggers import Exclusions, Specs, Window

app = App()


@app.task
def digest() -> None:
    print("digest sent")


@app.task
def health_check() -> None:
    print("all good")


def show(title: str) -> None:
    print(title)
    for key in ("digest", "health"):
        runs = [o for o in app.preview(key, 4) if not (o.note or "").startswith("not run")]
        print(f"  {key}: " + ", ".join(f"{o.at:%a %d %b %H:%M} UTC" for o in runs))


def main() -> None:
    office = Window(time(9), time(18), "MON-FRI")
    app.schedules.calendars.put(
        "desk", Exclusions(windows=(office,), holidays="FR"), note="office hours", actor="ops"
    )
    both_offices = Specs(
        specs=(Cron("0 9 * * *", tz="Europe/Paris"), Cron("0 9 * * *", tz="America/New_York")),
        tz="Europe/Paris",  # the calendar's hours are Paris hours here
        calendar="desk",
    )
    digest.schedule(trigger=both_offices, key="digest", on_conflict="replace")
    checks = Repeating(
        interval=timedelta(minutes=90),
        calendar="desk",
        misfire=Misfire.CATCH_UP,
        max_catch_up=3,  # after an outage: at most the newest 3 missed checks
        catch_up_window=timedelta(hours=6),  # and none older than 6 hours
    )
    health_check.schedule(trigger=checks, key="health", on_conflict="replace")
    show("next runs:")

    first_day = app.preview("digest", 1)[0].at.date()
    app.schedules.calendars.put(
        "desk",
        Exclusions(windows=(office,), holidays="FR", dates=(first_day,)),
        note="strike: the office is closed",
        actor="ops",
    )
    show(f"after closing {first_day}:")
    for change in app.schedules.calendars.history("desk"):
        print(f"  {change.at:%H:%M:%S} {change.actor}: {change.note} ({change.detail})")
    print("digest:", both_offices.describe())
    app.close()


if __name__ == "__main__":
    main()
