"""Chains, groups and batches: building them, their fan-in, reading them back, and
``app.batches``."""
