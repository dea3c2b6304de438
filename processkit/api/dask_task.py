"""A run carried for a Dask task, on a worker's task thread or in an ``async def`` task on its
event loop: once Dask lets the task go (the client that wanted it is gone: Ctrl-C, killed; the
scheduler released it), the run stops as one whose caller is gone, since Dask stops neither a
thread that runs nor an ``async def`` task, and the run otherwise went on to its own end or
timeout for a result nobody takes. Used by ``processkit.run``, a ``start``ed run's
``wait``/``result``/``poll``/``communicate`` in the task that started it (``taken_within``), ``processkit.batch`` and
``bench`` (``one_reply``), and ``run_async`` and a ``batch --dask-scheduler`` chunk
(``once_let_go``). Dask is never imported here: a process that has not imported
``distributed`` is no Dask worker."""

from __future__ import annotations

import select
import socket
import sys
import time

from ..signum import CALLER_GONE_SOURCE
from . import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .service import Connection

ASKED_EVERY_S = 1.0  # how often a run carried for a Dask task asks whether it is still wanted


def current() -> tuple | None:
    """The Dask task this code runs in, as its worker's state and its key: on a worker's task
    thread, or inside an ``async def`` task on its event loop; None anywhere else (and on an older
    distributed, which gives no way to ask)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # no worker in this process, or not in a task of its
        return None
    state = getattr(worker, "state", None)
    if state is None or (key := _current(worker, state)) is None:
        return None
    return state, key


def let_go(task: tuple | None = None) -> Callable[[], bool] | None:
    """What tells whether Dask let ``task`` go (its key cancelled, or gone, on the worker; by
    default the task this code runs in, ``current``); None outside a Dask task."""
    task = task or current()
    if task is None:
        return None
    state, key = task

    def gone() -> bool:
        found = state.tasks.get(key)
        return found is None or found.state == "cancelled"

    return gone


def _current(worker, state) -> object:
    """The key of the task this code runs in: its thread's, or, on the worker's event loop, the
    ``async def`` task's, which Dask runs as an asyncio task named ``execute(<key>)`` (it does not
    cancel that task when it lets the key go); None when neither."""
    try:
        return worker.get_current_task()
    except KeyError:  # not a task's thread
        pass
    import asyncio

    try:
        running = asyncio.current_task()
    except RuntimeError:  # no event loop runs here
        return None
    name = running.get_name() if running is not None else None
    return next((task.key for task in state.executing if name == f"execute({task.key!r})"), None)


def taken(connection: Connection, rid: int) -> tuple:
    """The reply of the run ``rid`` this code started, waited for until it comes (``_waited``):
    in a Dask task, stopped once Dask lets it go."""
    report = _waited(connection, rid, None, let_go())
    assert report is not None  # no timeout was given
    return report


def taken_within(
    connection: Connection, rid: int, timeout: float | None, started: tuple | None, keep: bool = False
) -> tuple | None:
    """The run ``rid``'s reply, waited for up to ``timeout`` seconds (None: until it comes); stopped
    once Dask lets the task go only where this code runs in the task that started the run
    (``started``, its ``current`` then): a task that waits on a run another task started (a
    worker-wide daemon) is not its owner, and its cancel leaves the run alone."""
    here = current()
    owner = here is not None and started is not None and here[0] is started[0] and here[1] == started[1]
    return _waited(connection, rid, timeout, let_go(here) if owner else None, keep)


def _waited(
    connection: Connection, rid: int, timeout: float | None, gone: Callable[[], bool] | None, keep: bool = False
) -> tuple | None:
    """The run ``rid``'s reply, waited for up to ``timeout`` seconds; with ``gone`` (its Dask
    task's ``let_go``) asked for each ASKED_EVERY_S, the run stopped as a gone caller's
    (``CALLER_GONE_SOURCE``) once Dask let the task go, and its reply taken. ``keep``: as ``take``'s
    (None at once once another waiter took the reply and let the request go)."""
    if gone is None:
        return connection.take(rid, timeout, keep)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = ASKED_EVERY_S if deadline is None else max(0.0, min(ASKED_EVERY_S, deadline - time.monotonic()))
        report = connection.take(rid, left, keep)
        if report is not None or not connection.holds(rid):
            return report
        if gone():
            connection.signal(rid, CALLER_GONE_SOURCE)
            return connection.take(rid, None, keep)
        if deadline is not None and time.monotonic() >= deadline:
            return None


def once_let_go(stop: Callable[[], None]) -> Callable[..., None] | None:
    """What to call each second (its arguments, a loop's tick's, ignored) in a Dask task, on its
    thread or in an ``async def`` task: ``stop`` called once, the first time Dask let the task go
    (a ``run_async``'s run, a ``batch --dask-scheduler`` chunk's jobs); None outside a Dask task."""
    gone = let_go()
    if gone is None:
        return None
    told = [False]

    def look(*_: object) -> None:
        if not told[0] and gone():
            told[0] = True
            stop()

    return look


def one_reply(sock: socket.socket, what: str, connection: Connection, rid: int) -> tuple:
    """The one reply of a process the service started for a call (``wire.one_reply``: a
    ``processkit.batch``'s, a ``processkit.bench``'s); on a Dask task's thread, that process
    stopped as a gone caller's (its stop word, ``CALLER_GONE_SOURCE``) once Dask let the task go,
    and its reply still awaited (its runs ended through their release). Where none was started
    (the service let the request ``rid`` go: ``frames.Dropped``, its connection closed with it),
    the failure the service filed for it on ``connection`` is raised, its code and one line,
    never a bare "ended without a reply"."""
    try:
        return _awaited(sock, what)
    except wire.EndedUnanswered:
        failure = connection.filed_failure(rid)
        if failure is None:
            raise
        raise failure from None


def _awaited(sock: socket.socket, what: str) -> tuple:
    """``one_reply``'s wait, on a Dask task's thread stopped once Dask lets the task go."""
    gone = let_go()
    if gone is None:
        return wire.one_reply(sock, what)
    readable = select.poll()  # not select.select: a descriptor past 1023 is out of its range
    readable.register(sock.fileno(), select.POLLIN)
    while not readable.poll(ASKED_EVERY_S * 1000):
        if gone():
            try:
                sock.send(CALLER_GONE_SOURCE.encode())
            except OSError:  # the batch's process ended: its reply, or its end, is read below
                pass
            break
    return wire.one_reply(sock, what)
