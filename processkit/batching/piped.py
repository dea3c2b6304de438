"""A template's arguments from a pipe, taken as they come: the batch's one loop must never wait
on a producer (the jobs running meanwhile have pipes to drain, deadlines and signals to meet),
so the pipe is read only when it is readable, and while no whole line is there the jobs' source
gives ``Awaited`` instead of a job.

``Schedule`` then has nothing to start; ``on_host`` carries ``until_readable`` beside the jobs,
a run of no child that ends once the pipe has more (or the batch stops), so the host turns on
while the input is awaited and asks for the next job as soon as it came. A regular file is read
as it is (its reads never wait), so it never yields ``Awaited``.
"""

from __future__ import annotations

import os
import select
import stat

from ..bounded import Limits, LineFeed, blocking
from ..engine import waits
from ..engine.stop_raise import stops_raise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..engine.host import Host

CHUNK = 1 << 16  # read at most this much at a time: the lines of one read are handed out in turn


class Awaited:
    """No job yet: the next one's bytes have not come through ``fd``."""

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd


WAITED = Awaited(-1)  # what ``until_readable`` returns, for ``on_host``'s ``finished`` to know it


def lines_as_they_come(fd: int, path: str, limits: Limits) -> Iterator[bytes | Awaited]:
    """Each line read from ``fd`` (its newline kept, within ``limits``, an InputError past
    them), or ``Awaited`` while no whole line is there; the descriptor is the caller's."""
    feed = LineFeed(path, limits)
    awaited = Awaited(fd)
    try:
        waits = not stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        waits = True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        if waits and not poller.poll(0):
            yield awaited
            continue
        data = os.read(fd, CHUNK)
        for _, line in feed.feed(data):
            yield line
        if not data:
            return


def wait_for(fd: int) -> None:
    """Wait here until ``fd`` is readable (before any job runs: nothing else needs the loop);
    a stop signal meanwhile raises ``Stopped``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    with stops_raise():
        poller.poll()


def in_order(fd: int) -> int:
    """``fd`` (opened without waiting, ``bounded.open_input``) made blocking for a reader that
    reads it in order before the jobs start; a FIFO first waits for its writer, as ``cat`` and
    GNU parallel wait in their open: with no writer yet, a read says end of file at once, and
    the input would be taken for empty (no jobs, exit 0) when its writer merely came late. A
    writer that came and closed ends the wait (the FIFO then holds its bytes, or says hang-up)."""
    blocking(fd)
    if stat.S_ISFIFO(os.fstat(fd).st_mode):
        wait_for(fd)
    return fd


def until_readable(host: Host, fd: int, stopping: Callable[[], bool]):
    """A run's steps with no child: ends once ``fd`` is readable or ``stopping()`` (a stop, the
    halt; the host wakes it then), returning ``WAITED``."""
    yield from waits.until_readable(host.run_loop(), fd, stopping)
    return WAITED
