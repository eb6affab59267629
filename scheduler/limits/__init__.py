"""Concurrency and rate limits per key: what a task declares, and how an operator sees
them."""
