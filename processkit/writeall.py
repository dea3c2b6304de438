"""One whole buffer written to a blocking descriptor (a file, a memfd, a pipe a reader drains).

``os.write`` may write less than it is given, and says so only in its count: a regular file
past ``RLIMIT_FSIZE`` (``ulimit -f``) or a full file system takes a part and refuses the rest
on the next write, and any single write stops at 2 GiB. A caller that ignores the count cuts
its data silently (a run's ``input=`` reached its child short, with returncode 0). So every
whole buffer goes through ``write_all``: it loops on the count, and a write that cannot
complete raises ``OSError`` (the kernel's own error, or ``EIO`` for a write that took nothing),
never returns having written less.
"""

from __future__ import annotations

import errno
import os
import stat

MAX_WRITE = 1 << 30  # one write at most: Linux caps each at 2 GiB less a page anyway
# A write that must not block on a shared blocking description: a pipe that polls writable has a
# free page, so PIPE_BUF (4096 on Linux) goes in whole; a terminal polls writable below
# WAKEUP_CHARS (256) pending, so that much (``write_bounded``; the engine's gated echo).
PIPE_PIECE = 4096
TERMINAL_PIECE = 256


def write_all(fd: int, data: bytes | bytearray | memoryview, stall: float | None = None) -> None:
    """Write all of ``data`` to ``fd`` (blocking), or raise OSError. A non-blocking descriptor (a
    standard stream whose pipe a Node.js or CI parent shares and made so; a FIFO opened so that
    its open does not wait) is waited on as a blocking write would wait: its EAGAIN is no error
    and no end; with ``stall``, a reader that takes nothing for that many seconds fails the
    write (``ETIMEDOUT``: ``useroutputs``' outputs, which never hang on another's FIFO)."""
    view = memoryview(data).cast("B")
    while view:
        try:
            count = os.write(fd, view[:MAX_WRITE])
        except BlockingIOError:
            if not _until_writable(fd, stall):
                raise OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s") from None
            continue
        if count <= 0:
            raise OSError(errno.EIO, "the write took nothing")
        view = view[count:]


def _until_writable(fd: int, stall: float | None) -> bool:
    """Whether ``fd`` polled writable (or in error, or hung up: the next write says which)
    within ``stall`` seconds (None: however long it takes)."""
    import select  # only for a non-blocking descriptor, which few writes meet

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    return bool(waiting.poll(None if stall is None else int(stall * 1000)))


def write_bounded(fd: int, data: bytes, stall: float) -> None:
    """All of ``data`` on a standard stream's shared description (the runner's own lines; a
    batch's stream where no private non-blocking one was had: a socket, a pipe or terminal whose
    reopen was refused), or ``ETIMEDOUT`` once its reader took nothing for ``stall`` seconds: a
    reader merely slow gets it all. Its ``O_NONBLOCK`` is never changed (a parent or a sibling
    sharing it would see its own writes fail or block), so each write is one that cannot block: a socket's with
    ``MSG_DONTWAIT``, a blocking pipe's or terminal's only the piece ``poll`` promises room for
    (as the engine's gated echo writes)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISSOCK(mode):
        import socket

        with socket.socket(fileno=os.dup(fd)) as sock:
            _write_polled(fd, data, stall, lambda piece: sock.send(piece, socket.MSG_DONTWAIT), len(data))
    elif stat.S_ISREG(mode) or not os.get_blocking(fd):  # a file never waits long; a non-blocking one says EAGAIN
        write_all(fd, data, stall)
    else:
        piece = PIPE_PIECE if stat.S_ISFIFO(mode) else TERMINAL_PIECE
        _write_polled(fd, data, stall, lambda chunk: os.write(fd, chunk), piece)


def _write_polled(fd: int, data: bytes, stall: float, send, piece: int) -> None:
    """``data`` through ``send``, ``piece`` bytes at most at a time, each once ``fd`` polls
    writable, or ``ETIMEDOUT`` after ``stall`` seconds without a byte taken."""
    import select
    import time

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    view = memoryview(data).cast("B")
    deadline = time.monotonic() + stall
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not waiting.poll(max(1, int(left * 1000))):
            raise OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s")
        try:
            count = send(view[:piece])
        except BlockingIOError:
            continue  # polled writable, yet no room for the piece: polled again, the same deadline
        view = view[count:]
        if count:
            deadline = time.monotonic() + stall
