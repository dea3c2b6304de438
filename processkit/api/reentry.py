"""A call made while the same thread is already inside a call to its runner service: a signal
handler that calls ``processkit.run`` while the thread waits in ``run`` (reading the socket for
every waiter, or holding one of the connection's locks). Such a call cannot wait on the shared
connection (the reader it would wait for is the thread itself, suspended under the handler), so it
goes to a spare connection of the thread's, one per depth, kept for the next such call, up to
``SPARES_MOST`` of them: a call deeper than that is refused (an interval timer whose handler calls
``run``, each tick interrupting the last one's call while its spare started, nested without end,
a new service per depth, 40 to 50 held for the thread's life)."""

from __future__ import annotations

import functools
import os
import sys
import threading

from ..errors import Failure, Kind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_local = threading.local()
SPARES_MOST = 3  # the depths a thread keeps a spare for; beyond it a re-entered call is refused


class _Busy:
    """Counts, per thread, the calls into a connection under way (``with busy:``)."""

    def __enter__(self) -> None:
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc) -> None:
        _local.depth -= 1


busy = _Busy()


def counted(method: Callable) -> Callable:
    """A connection's method whose call is counted in ``busy``."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        with busy:
            return method(*args, **kwargs)

    return call


def depth() -> int:
    """How many calls into a connection this thread is inside (0: none, the shared one is free to it)."""
    return getattr(_local, "depth", 0)


class _Spares(dict):
    """A thread's spares by depth; those it lets go (replaced, or the thread ended) go as a replaced
    shared one does (``let_go``). At the interpreter's exit nothing is done: the module globals the
    closing calls are gone, and the descriptors close with the process."""

    def __del__(self, finalizing=sys.is_finalizing) -> None:  # bound now: ``sys`` may be None by then
        if not finalizing():
            for found in self.values():
                let_go(found)


def let_go(found) -> None:
    """A spare this thread no longer keeps: closed and its service collected (``Connection.retire``)
    unless a started run's handle still holds a request on it; then closed when the last holder lets
    go (``Connection.__del__``), never under a held run."""
    if found.owner == os.getpid() and (found.gone or found.idle):
        found.retire()


def spare(make: Callable):
    """This thread's connection (``api.service.Connection``) for calls made at its current depth: the
    kept one while it is still this process's, alive and for the same places, else a new one ``make`` starts."""
    at = depth()
    if at > SPARES_MOST:
        raise Failure(
            Kind.USAGE,
            f"a call made {at} deep inside calls this thread is already in (signal handlers interrupting "
            f"each other's calls) is refused: at most {SPARES_MOST} runner services are kept for such calls; "
            "let a handler's call end before the next signal comes (a longer timer interval)",
        )
    spares = _local.__dict__.setdefault("spares", _Spares())
    found = spares.get(at)
    if found is None or not found.usable():
        if found is not None:
            let_go(found)
        found = spares[at] = make()
    return found


def suspended(box: list[tuple], timeout: float | None, held: bool, keep: bool) -> tuple | None:
    """A wait on a connection whose reader, or its mailbox's holder (``held``), is this very thread,
    suspended under a signal handler (``handle.wait()`` of a run started before): no other thread reads
    for it, and it slept for ever. A reply filed is served (not while the mailbox is held: the suspended
    holder may be between two steps on it; ``keep``: left filed, as ``take`` leaves it), a look
    (``poll()``) finds None, any other wait raises."""
    if box and not held:
        return box[0] if keep else box.pop(0)
    if timeout == 0:
        return None
    doing = "filed a reply of the runner service" if held else "read the runner service's socket"
    raise Failure(
        Kind.USAGE,
        f"a wait on a run started before, from a signal handler that interrupted this thread while it {doing}, "
        "cannot be served: the run's reply would come through the interrupted read; "
        "wait after the handler returns (or from another thread), or poll() in the handler",
    )


def forget_after_fork() -> None:
    """In a forked child: the spares the forking thread held are the parent's services (each let go
    by ``Connection.forked``; never retired here, as ``let_go`` sees they are not this process's)."""
    _local.__dict__.pop("spares", None)
