"""Which runner service (``service.Connection``) a call of this process goes to: one per process,
started on first use, as multiprocessing's forkserver is, and shared by every thread; a spare of
the thread's when the call is re-entered (``reentry``). A fork of the caller forgets the service
it inherited (its socket closed in the child, ``os.register_at_fork``) and starts its own on first
use; so does a caller whose environment names another registry or scratch place than the one the
service was started with, since the service lodges its runs there once.
"""

from __future__ import annotations

import os
import threading
import time

from . import reentry
from .service import Connection, ServiceGone, ServiceUnstartable

_connection: Connection | None = None
_starting = threading.Lock()
_failed: tuple[float, str] | None = None  # when the last start failed, and why


def send(kind: str, *payload, fds: list[int] | tuple[int, ...] = (), env: bool = False) -> tuple[Connection, int]:
    """Send a request to this process's service; one found gone when the request is written (killed since the
    last call) is replaced once, as nothing of the request reached it; one that could not start says so at once."""
    pick = (lambda: reentry.spare(Connection)) if reentry.depth() else connection  # re-entered: a spare
    try:
        found = pick()
        return found, found.send(kind, *payload, fds=fds, env=env)
    except ServiceUnstartable:
        raise
    except ServiceGone:
        found = pick()
        return found, found.send(kind, *payload, fds=fds, env=env)


def connection() -> Connection:
    """This process's runner service, started now if it has none (or its one has ended). The
    threads queued behind a start that fails raise its failure, not each wait out its own."""
    global _connection, _failed
    found = _connection
    if found is not None and found.usable():
        return found
    asked = time.monotonic()
    with reentry.busy, _starting:
        found = _connection
        if found is None or not found.usable():
            if found is not None and found.owner == os.getpid():
                if found.gone:
                    found.process.poll()  # an ended service is collected, not left a zombie
                else:  # replaced (the caller's user or places changed): ended and collected, unless
                    found.retire_if_idle()  # calls are in flight on it (a start() handle's): it serves them on
            if _failed is not None and _failed[0] >= asked:  # the start this call queued behind
                raise ServiceUnstartable(_failed[1])
            try:
                found = _connection = Connection()
            except ServiceUnstartable as exc:
                _failed = (time.monotonic(), str(exc))
                raise
        return found


def _forget_after_fork() -> None:
    """In a forked child: the parent's services (its own and the spares, each let go by
    ``Connection.forked``) are forgotten; this process starts its own."""
    global _connection, _starting
    _connection, _starting = None, threading.Lock()
    reentry.forget_after_fork()


os.register_at_fork(after_in_child=_forget_after_fork)
