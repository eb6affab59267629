"""``tickwork``: run workers, enqueue, inspect and cancel messages, manage the poison queue.

Exit codes: 0 success; 1 nothing found (``show``/``cancel``/``poison show``); 2 invalid
input or configuration; 3 the backend failed or is unreachable; 4 an unexpected error.

Modules: ``main.py`` (the group), ``common.py`` (errors, state, shared options), one module
per command family (``worker``, ``messages``, ``status``, ``poison``, ``cassandra``,
``postgres``, ...).
"""

from tickwork.cli.main import cli, main

__all__ = ["cli", "main"]
