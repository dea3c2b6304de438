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
# WAKEUP_CHARS (256) pending, so that much (``write_bounded``, ``write_own``; the engine's gated echo).
PIPE_PIECE = 4096
TERMINAL_PIECE = 256
# The files (st_dev, st_ino) whose reader the runner found stalled: a bounded write of its own
# into them given up (``write_all``'s ``stall``, ``write_bounded``: a batch's lines after a stop),
# or the live echo (``engine.teardown``, after ECHO_STALL_SECONDS without a byte taken). One rule
# for both: the runner's later words there wait no more (``write_own``), nor a later run's echo,
# until a later run's echo finds the reader taking bytes again (``reads_again``).
_stalled: set[tuple[int, int]] = set()


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
                raise _gave_up(fd, stall) from None
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
    """All of ``data`` on a standard stream's shared description (a batch's stream where no
    private non-blocking one was had: a socket, a pipe or terminal whose reopen was refused), or
    ``ETIMEDOUT`` once its reader took nothing for ``stall`` seconds: a reader merely slow gets it
    all; a regular file or ``/dev/null`` is written straight. Its ``O_NONBLOCK`` is never changed
    (a parent or a sibling sharing it would see its own writes fail or block), so each write is
    one that cannot block: a socket's with ``MSG_DONTWAIT``, a blocking pipe's or terminal's only
    the piece ``poll`` promises room for (as the engine's gated echo writes)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISSOCK(mode):
        import socket

        with socket.socket(fileno=os.dup(fd)) as sock:
            _write_polled(fd, data, stall, lambda piece: sock.send(piece, socket.MSG_DONTWAIT), len(data))
    elif _never_held(fd, mode) or not os.get_blocking(fd):  # a non-blocking one says EAGAIN
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
            raise _gave_up(fd, stall)
        try:
            count = send(view[:piece])
        except BlockingIOError:
            continue  # polled writable, yet no room for the piece: polled again, the same deadline
        view = view[count:]
        if count:
            deadline = time.monotonic() + stall


def _gave_up(fd: int, stall: float | None) -> OSError:
    """The error of a bounded write whose reader took nothing for ``stall`` seconds, its file
    marked as given up first (``given_up``)."""
    try:
        found = os.fstat(fd)
    except OSError:
        pass
    else:
        given_up((found.st_dev, found.st_ino))
    return OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s")


def given_up(target: tuple[int, int]) -> None:
    """The reader of the file ``target`` (st_dev, st_ino) took nothing for a whole bound of the
    runner's (its echo's stall, or a bounded write's): the runner's own writes to it wait no
    more (``write_own``), nor a later run's echo into it (``engine.echo.StallClock``)."""
    _stalled.add(target)


def reads_again(target: tuple[int, int]) -> None:
    """The reader of ``target`` took bytes of a later run's echo since ``given_up``: it is waited
    for again, as any reader is (the runner's own lines there too)."""
    _stalled.discard(target)


def is_given_up(target: tuple[int, int]) -> bool:
    """Whether ``given_up`` marked the file ``target``."""
    return target in _stalled


def write_own(fd: int, data: bytes) -> int:
    """The runner's own words on its stdout or stderr; how many bytes of ``data`` went in.

    A write that waits for the reader as a blocking one would (``write_all``; a terminal paused by
    ^S, a reader slow to start get it all, as the reference's blocking writes do), until the
    runner knows that reader stalled: the live echo into the same file, or a bounded write of its
    own there, was given up (``given_up``). From then on each write is one that does not wait,
    and what the file does not take at once is dropped: the runner's tail costs that one bound in
    all, not one a line. A reader gone raises (``BrokenPipeError``), as any failed write."""
    found = os.fstat(fd)
    if (found.st_dev, found.st_ino) not in _stalled or _never_held(fd, found.st_mode):
        write_all(fd, data)
        return len(data)
    if not os.get_blocking(fd):
        return _taken(lambda piece: os.write(fd, piece), data, MAX_WRITE)
    if stat.S_ISSOCK(found.st_mode):
        import socket

        with socket.socket(fileno=os.dup(fd)) as sock:
            return _taken(lambda piece: sock.send(piece, socket.MSG_DONTWAIT), data, MAX_WRITE)
    try:  # a private non-blocking description: another writer of the shared one cannot take its room
        private = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:  # no /proc, or the reopen refused: only the piece poll promises room for
        piece = PIPE_PIECE if stat.S_ISFIFO(found.st_mode) else TERMINAL_PIECE
        return _taken(lambda chunk: _if_room(fd, chunk), data, piece)
    try:
        return _taken(lambda piece: os.write(private, piece), data, MAX_WRITE)
    finally:
        os.close(private)


def _never_held(fd: int, mode: int) -> bool:
    """A regular file or a character device that is no terminal (``/dev/null``): a write to it
    never waits for a reader."""
    return stat.S_ISREG(mode) or (stat.S_ISCHR(mode) and not os.isatty(fd))


def _taken(send, data: bytes, piece: int) -> int:
    """How much of ``data`` ``send`` took, ``piece`` bytes at most at a time, before it would wait."""
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        try:
            count = send(view[done : done + piece])
        except BlockingIOError:
            break
        if count <= 0:
            break
        done += count
    return done


def _if_room(fd: int, chunk: memoryview) -> int:
    """``chunk`` written to a blocking ``fd`` if it polls writable now, else ``BlockingIOError``."""
    import select

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    if not waiting.poll(0):
        raise BlockingIOError(errno.EAGAIN, "no room")
    return os.write(fd, chunk)
