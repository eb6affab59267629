"""The Redis and Redis Cluster backend (``redis://``, ``rediss://``, ``redis+cluster://``)."""

from scheduler.backends.redis.backend import RedisBackend
from scheduler.backends.redis.options import RedisOptions

__all__ = ["RedisBackend", "RedisOptions"]
