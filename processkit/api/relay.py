"""A read of the shared socket the main thread hands to a thread of its own while other calls are
open (``api.service.Connection.take``). Python runs a signal handler in the main thread alone, as
soon as a call there returns: a handler that raised (Ctrl-C's KeyboardInterrupt, a SIGTERM handler
that raises) as the main thread's read returned dropped the bytes it took, the connection was given
up, and its service ended every run it carried: the runs of every other thread, and the main
thread's own ``start()``ed runs, ended for one interruption of one call. Read by a thread no
handler runs in, the bytes reach the frames whatever interrupts the main thread, which waits for
that read's end in ``join`` (where an interruption only ends its own wait). Only while a request
another thread opened is open: a process that calls from its main thread alone reads in that
thread as before, paying no thread a read (its own ``start()``ed runs share its call's fate on an
interruption, as they did)."""

from __future__ import annotations

import threading

from .stopped import WATCH_SECONDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable


class Box(list):
    """A request's reply slot, knowing the thread that opened it (the hello's is a plain list) and,
    for a run request, the spec it sent (asked for whole again: ``api.sending``)."""

    def __init__(self, spec: object = None) -> None:
        super().__init__()
        self.opener = threading.get_ident()
        self.spec = spec
        self.interrupted: BaseException | None = None  # held back as its request was written (``written``)
        self.sent = False  # its request's frame written whole (under the send lock): its spec may be asked for


def wanted(boxes: Iterable[list]) -> bool:
    """Whether the calling thread's read goes to a relay: it is the main thread (where handlers
    run) and a request another thread opened is open (a run of another's to end)."""
    me = threading.get_ident()
    if me != threading.main_thread().ident:
        return False
    return any(getattr(box, "opener", me) != me for box in list(boxes))  # a copy: no lock taken


def read(turn: Callable[[float], None], wait: float) -> None:
    """``turn(wait)`` (one read of up to ``wait`` seconds, the reader's role taken and given back)
    run by a thread of its own, waited for; what it raised raised here. Where no thread can
    start, run here: this thread reads, as before."""
    raised: list[BaseException] = []

    def relayed() -> None:
        try:
            turn(wait)
        except BaseException as exc:  # noqa: BLE001 - raised in the thread that waits, as its own read's
            raised.append(exc)

    helper = threading.Thread(target=relayed, name="processkit-relay", daemon=True)
    try:
        helper.start()
    except RuntimeError:  # no thread to be had
        turn(wait)
        return
    helper.join()
    if raised:
        raise raised[0]


def written(write: Callable[[], None], look: Callable[[], None], cut: Callable[[], None]) -> BaseException | None:
    """``write()`` (a request's whole frame onto the socket) run by a thread of its own, waited for
    to its end whatever interrupts this thread once; the interruption handed back, to be raised once the
    caller holds the request's id (``Box.interrupted``, raised by the connection's next look at it),
    so its run ends through its release. A handler that raised as the main thread's ``sendall``
    returned left the frame whole or cut, nobody knew which: the connection was given up, and its
    service ended the runs of every thread. What ``write`` raised is raised here (an interruption
    first). ``look()`` each ``WATCH_SECONDS`` of the wait: a service a signal stopped reads
    nothing, and is continued (``api.stopped``). A second interruption ``cut()``s the write (a
    service that never reads: a tracer's stop, or wedged), waits for its end and raises the first:
    the connection is given up, as before. Whoever takes ``claim`` writes: where no thread
    started (none to be had, or an interruption as it started, before it took it), this thread, as before."""
    raised: list[BaseException] = []
    done, claim = threading.Event(), threading.Lock()

    def relayed() -> None:
        if claim.acquire(blocking=False):
            try:
                write()
            except BaseException as exc:  # noqa: BLE001 - raised in the thread that waits
                raised.append(exc)
            finally:
                done.set()

    interrupted: BaseException | None = None
    started = False
    helper = threading.Thread(target=relayed, name="processkit-relay", daemon=True)
    try:
        helper.start()
        started = True  # the thread's alone to take: this one never writes
    except RuntimeError:  # no thread to be had
        pass
    except BaseException as exc:  # noqa: BLE001 - handed back once the frame is whole
        interrupted = exc
    if not started and claim.acquire(blocking=False):
        write()
        return interrupted
    again = cuts = False  # a second interruption came; the write was cut
    while not done.is_set():
        try:
            if again and not cuts:
                cut()
                cuts = True
            elif not done.wait(WATCH_SECONDS):
                look()
        except BaseException as exc:  # noqa: BLE001 - handed back once the frame is whole
            again = interrupted is not None
            interrupted = interrupted or exc
    if raised or cuts:
        raise interrupted or raised[0]
    return interrupted
