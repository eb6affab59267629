"""Recurring schedules: steering them by key (``app.schedules``), their occurrence ledger,
and schedules whose runs may overlap."""
