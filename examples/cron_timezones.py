"""Cron in a timezone, Quartz syntax, what DST does to a schedule (and how a schedule can
choose), and dates a schedule skips (holidays).

python -m examples.cron_timezones        # prints the next fires; enqueues two schedules
tickwork worker -A examples.cron_timezones --duration 15
tickwork schedules preview open:XPAR -n 5
tickwork cron explain "30 2 * * *" --tz Europe/Paris
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from tickwork import App, Cron
from tickwork.triggers import Exclusions, preview

app = App()


@app.task
def market_open(exchange: str) -> None:
    print(f"  -> {exchange} opens", flush=True)


def show_fires(cron: Cron, start: datetime, count: int) -> None:
    print(f"{cron.expr!r} in {cron.tz}:")
    for fire in preview(cron, count, start):
        note = f"  ({fire.note})" if fire.note else ""
        print(f"   {fire.at.isoformat()}  local {fire.wall.isoformat()}{note}")


def main() -> None:
    # fixed-time schedule across New York's fall-back change: 01:30 runs once
    show_fires(Cron("30 1 * * *", tz="America/New_York"), datetime(2026, 10, 31, tzinfo=UTC), 3)
    # interval schedule across the same change: 01:30 EDT and 01:30 EST both run
    show_fires(Cron("30 * * * *", tz="America/New_York"), datetime(2026, 11, 1, 4, tzinfo=UTC), 4)
    # ... unless the schedule chooses: here only the second pass (01:30 EST) runs
    last = Cron("30 1 * * *", tz="America/New_York", dst_repeat="last")
    show_fires(last, datetime(2026, 10, 31, tzinfo=UTC), 2)
    # Quartz weekdays are 1 (SUN) to 7 (SAT): 2-6 is MON-FRI; LW is the last weekday
    show_fires(Cron("0 0 9 ? * 2-6", tz="Europe/Paris"), datetime(2026, 11, 20, tzinfo=UTC), 3)
    show_fires(Cron("0 0 18 LW * ?", tz="Europe/Paris"), datetime(2026, 1, 1, tzinfo=UTC), 3)
    # the Paris exchange does not open on French public holidays, nor on a closure day
    closed = Exclusions(holidays="FR", dates=(date(2026, 12, 24),))
    weekdays_open = Cron("0 0 9 ? * MON-FRI", tz="Europe/Paris", exclude=closed)
    show_fires(weekdays_open, datetime(2026, 12, 22, tzinfo=UTC), 4)

    market_open.schedule(
        args=("XPAR",),
        trigger=weekdays_open,
        key="open:XPAR",
        on_conflict="replace",
    )
    market_open.schedule(
        args=("demo",),
        trigger=Cron("*/3 * * * * ?", tz="Asia/Kathmandu"),
        key="open:demo",
        on_conflict="replace",
    )
    app.close()


if __name__ == "__main__":
    main()
