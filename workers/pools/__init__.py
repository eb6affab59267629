"""Pools: where handlers run (threads, processes, the event loop), how a run is classified,
and time limits."""
