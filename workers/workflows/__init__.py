"""Workflow fan-in: the counters batches, groups and graphs settle as their members end."""
