"""Whether a stream's line longer than PIPE_BUF can go into its pipe whole now.

POSIX makes a pipe write atomic only up to PIPE_BUF. Past it, Linux still copies a non-blocking
write under the pipe's lock without sleeping, so it is neither interleaved with another writer's
nor cut, as long as the pipe has room for all of it; short of room it writes what fits and
returns, and the line's rest waits: a reader that stalls then (or another stream sharing the
pipe) is left with half a line. The room is read as the pipe's capacity (``F_GETPIPE_SZ``) and
the bytes it holds (``FIONREAD``); the kernel counts the room in page slots, which partly filled
slots leave uncounted in bytes, so only an empty pipe is sure to take a line as long as its
capacity. Loaded by ``events/backlog.py`` at a deferred stream's first backlog, and by a run's
drain where a descendant held its pipes past the root's exit (``OutputStream.emptied``: what
a pipe holds), never by a plain run.

The wait for an empty pipe is bounded (``Watch``'s ``most``, half the stall): a pipe that other
writers keep busy may never empty while its reader reads steadily (no stall), and the line waited
for good, looked for 100 times a second. Past the bound it goes as the pipe takes it, as it did
before the wait, its rest too, at the first look that finds the reader took bytes since the line
began to wait or finds the pipe's free bytes enough for the whole line; the next long line waits
afresh (``went``). The bound is shorter than the stall so that a reader whose co-writers keep its
pipe full, so that few looks see the bytes it holds drop, still has looks left before it would
count as stalled. A reader that took nothing since the line began to wait is failed as stalled,
the line not cut (but where the pipe's free bytes, counted in partly filled page slots, took
only part of it).
"""

from __future__ import annotations

import fcntl
import select
import struct
import termios
import time

ROOM_POLL_SECONDS = 0.01  # how often a line longer than PIPE_BUF looks for an empty pipe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop, Timer


def held(fd: int, size: int) -> tuple[int, int] | None:
    """None when a write of ``size`` bytes to ``fd`` goes whole now (its pipe is empty), or can
    never go whole (no pipe, or a line longer than the pipe holds: written as it takes it, as
    before); else the bytes the pipe holds, which the reader's progress shrinks, and its free
    bytes."""
    try:
        capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        holds = _queued(fd)
    except OSError:
        return None
    if size > capacity or holds == 0:
        return None
    return holds, capacity - holds


def queued(fd: int) -> int:
    """The bytes ``fd``'s pipe holds now (``FIONREAD``); 0 where it cannot be read
    (``OutputStream.emptied``)."""
    try:
        return _queued(fd)
    except OSError:
        return 0


def _queued(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


class Watch:
    """A deferred stream's pipe while a backlog waits: watched on its loop for room, or, while a
    line longer than PIPE_BUF waits for the pipe to empty (``waits``), looked at every
    ``ROOM_POLL_SECONDS`` instead (the watch for room would wake the loop at each of the
    reader's reads); ``push`` (the emitter's ``drained``) is called either way. A line waits
    ``most`` seconds at most for the pipe to empty (the module's why), then goes at a look that
    finds its reader took since it began to wait or room for all of it."""

    def __init__(self, loop: Loop, fd: int, push: Callable[[], object], most: float):
        self._loop, self._fd, self._push, self._most = loop, fd, push, most
        self._writer = False
        self._timer: Timer | None = None
        self.held = -1  # the bytes the pipe held at the last look while a long line waits, else -1
        self.taken_at = 0.0  # when those bytes were last seen fewer: its reader takes, not stalled
        self._since: float | None = None  # when the line going now began to wait, None: none does

    def waits(self, size: int) -> bool:
        """Whether a line of ``size`` bytes must wait for the pipe to empty (``held``): not once
        it waited ``most`` seconds, until ``went``."""
        found = held(self._fd, size)
        if found is None:
            self.held = -1
            return False
        now, free = found
        at = time.monotonic()
        if 0 <= self.held and now < self.held:
            self.taken_at = at
        if self._since is None:
            self._since = at
        elif at - self._since >= self._most and (self.taken_at >= self._since or free >= size):
            self.held = -1  # the pipe never emptied, but its reader took, or it has room: as it fits
            return False
        self.held = now
        return True

    def went(self) -> None:
        """A line went whole (to its end): the next long line waits for an empty pipe afresh."""
        self._since = None

    def arm(self) -> None:
        if self.held >= 0:
            self._drop_writer()
            if self._timer is None:
                self._timer = self._loop.call_later(ROOM_POLL_SECONDS, self._look)
            return
        self._drop_timer()
        if not self._writer:
            self._loop.add_writer(self._fd, self._on_room)
            self._writer = True

    def wait(self, most: float) -> None:
        """Outside the loop (a stream closed with a backlog): until the pipe may take more."""
        if self.held >= 0:
            time.sleep(ROOM_POLL_SECONDS)
        else:  # poll: a deferred stream's descriptor may be past 1024, which select.select refuses
            waiting = select.poll()
            waiting.register(self._fd, select.POLLOUT)
            waiting.poll(int(most * 1000))

    def _look(self) -> None:
        self._timer = None
        self._push()

    def _on_room(self) -> None:
        self._push()

    def off(self) -> None:
        self._drop_timer()
        self._drop_writer()

    def _drop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _drop_writer(self) -> None:
        if self._writer:
            self._writer = False
            self._loop.remove_writer(self._fd)
