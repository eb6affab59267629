"""Admission: what a claimed message must pass before it runs (its task, its expiry,
concurrency and rate limits)."""
