"""The Redis and Redis Cluster backend (``redis://``, ``rediss://``, ``redis+cluster://``)."""

from tickwork.scheduler.backends.redis.backend import RedisBackend
from tickwork.scheduler.backends.redis.options import RedisOptions

__all__ = ["RedisBackend", "RedisOptions"]
