"""Script calls made from an event loop on the loop itself (``RedisMessages.aenqueue``).

A blocking call run in a thread from the async producer API (``await task.adelay()``)
costs more in the hop there and back than in the round trip; an asyncio connection of
the loop's own, kept between calls, costs about what a blocking call does.

An asyncio connection belongs to the loop that opened it, so each loop gets its own pool,
made on first use with the blocking client's URL and options (TLS and credentials
included). A call takes an idle connection of its loop (or a new one from the pool, which
bounds how many are open), packs the commands with hiredis, sends them in one write and
reads the replies; the connection goes back to the idle list. One that failed, timed out
or was cancelled with a reply unread is disconnected and given back to the pool, never
reused. A loop's connections are closed when it shuts down its async generators
(``asyncio.run`` does, as do servers such as uvicorn). A loop that cannot be weakly
referenced (an event loop implementation without ``__weakref__``) is not served here:
its calls go through a thread as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import hiredis
import redis
import redis.asyncio
from redis.commands.core import Script
from redis.exceptions import NoScriptError


class _LoopSide:
    """One loop's pool and idle connections, and the generator whose closing (at the
    loop's shutdown) closes them."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.idle: list[Any] = []
        self.guard: AsyncIterator[None] | None = None

    async def close(self) -> None:
        self.idle.clear()
        await self.pool.disconnect()


async def _closed_at_shutdown(side: _LoopSide) -> AsyncIterator[None]:
    """Suspended until the loop closes its async generators, then closes ``side``."""
    try:
        yield
    finally:
        await side.close()


class LoopWire:
    """Commands sent from the running event loop on a connection of that loop."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        """``url`` without its query, ``options`` the keyword arguments of the blocking
        client but its retries (a call whose connection fails here is sent again through
        the blocking path, whose retries reconnect). The socket timeout bounds each call
        whole here (``asyncio.timeout``: redis-py would start a task per write for it)."""
        self._url = url
        self._timeout_s: float | None = options.get("socket_timeout")
        self._options = {**options, "socket_timeout": None}
        self._sides: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSide] = (
            weakref.WeakKeyDictionary()
        )

    async def _side(self) -> _LoopSide | None:
        loop = asyncio.get_running_loop()
        try:
            side = self._sides.get(loop)
        except TypeError:  # not weakly referenceable: never kept here, so never closed late
            return None
        if side is None:
            pool = redis.asyncio.ConnectionPool.from_url(self._url, **self._options)
            side = self._sides[loop] = _LoopSide(pool)
            side.guard = _closed_at_shutdown(side)
            await anext(side.guard)  # registered with the loop's async-generator hooks
        return side

    async def scripts(
        self, scripts: Mapping[str, Script], calls: Sequence[tuple[str, list[str], list[Any]]]
    ) -> list[Any] | None:
        """The replies to (script, keys, args) ``calls`` sent as ``EVALSHA`` in one round
        trip, errors in place, as ``scripts.evalsha_round_trip`` does: calls the server
        answers ``NOSCRIPT`` did not run, so the scripts are loaded and those sent again.
        None when the connection failed: which calls ran is unknown, so only calls that may
        run twice (an enqueue: a message stored byte for byte is a ``DUPLICATE``) may then
        be sent again."""
        commands = [
            ("EVALSHA", scripts[name].sha, len(keys), *keys, *args) for name, keys, args in calls
        ]
        replies = await self.send(commands)
        missing = (
            []
            if replies is None
            else [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
        )
        if replies is None or not missing:
            return replies
        loaded = await self.send([("SCRIPT", "LOAD", s.script) for s in scripts.values()])
        again = None if loaded is None else await self.send([commands[i] for i in missing])
        if again is None:
            return None
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
        return replies

    async def send(self, commands: Sequence[tuple[Any, ...]]) -> list[Any] | None:
        """The replies to ``commands`` sent in one round trip, an error reply in its place
        as the exception redis-py makes of it (``NoScriptError``...); None when the
        connection failed or timed out (which commands ran is then unknown), or this
        loop is not served here (none ran)."""
        side = await self._side()
        if side is None:
            return None
        try:
            connection = side.idle.pop() if side.idle else await side.pool.get_connection()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return None
        try:
            async with asyncio.timeout(self._timeout_s):
                await connection.send_packed_command(
                    b"".join(hiredis.pack_command(c) for c in commands), check_health=False
                )
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(await connection.read_response())
                    except redis.ResponseError as err:
                        replies.append(err)
        except (redis.ConnectionError, redis.TimeoutError, OSError):  # TimeoutError too
            await self._drop(side, connection)
            return None
        except BaseException:  # cancelled mid-reply: never read by the next caller as its
            await self._drop(side, connection)  # own reply, and its pool slot given back
            raise
        side.idle.append(connection)
        return replies

    @staticmethod
    async def _drop(side: _LoopSide, connection: Any) -> None:
        try:
            await connection.disconnect(nowait=True)
        finally:
            await side.pool.release(connection)
