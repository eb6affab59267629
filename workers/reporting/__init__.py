"""Reporting: metrics, the activity log behind the dashboard's charts, and the worker
registry."""
