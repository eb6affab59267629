"""tickwork and its peers (Celery, RQ, Dramatiq, Huey, arq) measured side by side on one
local Redis: ``python -m bench.peers.run`` (``make bench-peers``)."""
