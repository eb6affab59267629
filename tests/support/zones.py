"""The timezones the trigger oracles run in: every kind of DST change (a 30-minute one
at Lord Howe, changes at midnight in Cairo, Havana and Santiago, a two-hour one at Troll,
odd offsets in Chatham, Kolkata and Kathmandu) and none (UTC)."""

ZONES = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "America/Santiago",
    "Europe/Dublin",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Africa/Cairo",  # DST changes at midnight
    "America/Havana",  # DST changes at midnight
    "UTC",
]
