"""A run's reply awaited on an asyncio event loop (``run_async``): the service's socket watched by
the loop, one reader per loop and socket however many calls await on it; each second the
service looked at (``api.stopped``) and, on a Dask task's thread, whether Dask let the task go
(``dask_task``)."""

from __future__ import annotations

from . import service, stopped
from .dask_task import once_let_go
from ..signum import CALLER_GONE_SOURCE


async def reply(connection: service.Connection, rid: int) -> dict:
    """The reply to ``rid``, awaited on the running event loop: the socket is watched by the
    loop, and a reply another thread read is handed over through ``call_soon_threadsafe``."""
    import asyncio

    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    def filed() -> None:
        loop.call_soon_threadsafe(arrived.set)

    # in a Dask task (``asyncio.run`` on its thread, or an ``async def`` task), the run stopped as a
    # gone caller's once Dask let the task go
    let_go = once_let_go(lambda: connection.signal(rid, CALLER_GONE_SOURCE))

    def look() -> None:  # the service continued if a signal stopped it (``api.stopped``)
        stopped.look(connection)
        if let_go is not None:
            let_go()
        timer[0] = loop.call_later(stopped.WATCH_SECONDS, look)

    timer = [loop.call_later(stopped.WATCH_SECONDS, look)]
    connection.wake(rid, filed)
    key = None
    try:
        while True:
            report = connection.take(rid, 0)  # a service gone raises ServiceGone: its socket may be closed (-1)
            if report is not None:
                return report[2]
            if key is None:  # one reader per loop and socket, however many calls await on it
                if (fd := connection.sock.fileno()) < 0:  # given up since that look: never spin on it
                    raise service.ServiceGone.of(connection.owner)
                if not _watching.get((loop, fd)):
                    loop.add_reader(fd, connection.read_now)
                key = (loop, fd)  # counted once its reader is on
                _watching[key] = _watching.get(key, 0) + 1
            await arrived.wait()
            arrived.clear()
    finally:
        timer[0].cancel()
        connection.wake(rid, None)
        if key is not None:
            _watching[key] -= 1
            if not _watching[key]:
                del _watching[key]
                loop.remove_reader(key[1])


_watching: dict[tuple, int] = {}  # (event loop, socket) -> calls awaiting on it
