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
# The files (st_dev, st_ino) whose reader the runner found stalled: the live echo into them given
# up (``engine.teardown``, after ECHO_STALL_SECONDS without a byte taken), a batch's bounded write
# there (its lines after a stop), or a bounded line of the runner's own (``write_own``). One rule
# for all: the runner's later words there wait no more (``write_own``: but for a terminal's lines
# the reference writes too), nor a later run's echo, until a later run's echo finds the reader
# taking bytes again (``reads_again``).
_stalled: set[tuple[int, int]] = set()
# The files the runner doubts: given up once (kept when the reader reads again), or whose echo a
# stop signal cut (``doubt``). Its own words there wait at most OWN_STALL_SECONDS for a byte taken,
# never unbounded again: a reader that took a later run's few bytes into the room its pipe had
# left took nothing, and a pipe nobody reads must not hold the runner for ever.
_doubted: set[tuple[int, int]] = set()
_times: dict[tuple[int, int], int] = {}  # how often each file was given up anew (``given_up``)
_stop_came: list[bool] = []  # a stop signal came (``doubt_own``): a terminal's shared lines wait unbounded no more
OWN_STALL_SECONDS = 5.0  # as the echo's stall (``engine.teardown.ECHO_STALL_SECONDS``)


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
                raise _gave_up(stall) from None
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
    one that cannot block: a socket's with ``MSG_DONTWAIT``, a blocking pipe's or terminal's on a
    private description reopened for the write, else only the piece ``poll`` promises room for (as
    the engine's gated echo writes)."""
    if _bounded_taken(fd, data, stall) < len(data):
        raise _gave_up(stall)


def write_till_stopped(fd: int, data: bytes, stall: float) -> None:
    """``write_bounded``'s write, waiting for the reader as a blocking write would until a stop
    signal came (``doubt_own``), then failing once it took nothing for ``stall`` seconds
    (``ETIMEDOUT``): a Dask batch's lines (``cli.batch_output``), which its client writes with no
    loop to queue them on, where a blocking write would hold the client for ever on a stderr nobody
    reads. It looks for the stop each second: a round begun before the stop gives up nothing, so
    the reader's ``stall`` counts from after it."""
    view = memoryview(data).cast("B")
    while True:
        stopped = bool(_stop_came)
        view = view[_bounded_taken(fd, view, stall if stopped else 1.0) :]
        if not view:
            return
        if stopped:
            raise _gave_up(stall)


def _bounded_taken(fd: int, data, stall: float) -> int:
    """How much of ``data`` ``write_bounded``'s writes got in before the reader took nothing for
    ``stall`` seconds."""
    mode = os.fstat(fd).st_mode
    if _never_held(fd, mode):
        write_all(fd, data)
        return len(data)
    return _unwaited(fd, mode, data, stall)


def _unwaited(fd: int, mode: int, data, stall: float) -> int:
    """How much of ``data`` went in to ``fd`` (of ``mode``, a write to it one that can wait)
    before its reader took nothing for ``stall`` seconds, by writes that never wait: a socket's
    send (``MSG_DONTWAIT``), a non-blocking one's (``EAGAIN``), else a private copy's."""
    if stat.S_ISSOCK(mode):
        return _sent(fd, data, MAX_WRITE, stall)
    if not os.get_blocking(fd):
        return _taken(lambda chunk: os.write(fd, chunk), fd, data, MAX_WRITE, stall)
    return _taken_privately(fd, mode, data, stall)


def _gave_up(stall: float | None) -> OSError:
    """The error of a bounded write whose reader took nothing for ``stall`` seconds (a
    ``TimeoutError``). Only a batch's marks the file (``given_up``: ``cli.batch_output``), not the
    events' or a user output's: a ``--jsonl`` on the runner's stdout, its reader paused for the
    events' shorter bound, leaves that stdout's echo its whole stall."""
    return OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s")


def given_up(target: tuple[int, int]) -> int:
    """The reader of the file ``target`` (st_dev, st_ino) took nothing for a whole bound of the
    runner's (its echo's stall, or a bounded write's): the runner's own writes to it wait no
    more (``write_own``), nor a later run's echo into it (``engine.echo.StallClock``). Returns
    how often it was given up anew (a reader that read again and stalled again counts twice)."""
    if target not in _stalled:
        _stalled.add(target)
        _times[target] = _times.get(target, 0) + 1
    _doubted.add(target)
    return _times[target]


def doubt(target: tuple[int, int]) -> None:
    """A stop signal (or the drain's ceiling) cut the echo into ``target`` while its reader was
    behind: the runner's own words there wait at most OWN_STALL_SECONDS for it (``write_own``)."""
    _doubted.add(target)


def doubt_own() -> None:
    """A stop signal came: the runner's own words on its stdout or stderr where that is a terminal
    wait at most OWN_STALL_SECONDS for a byte taken from now on (``doubt``), its stop's line too,
    and so do the ``shared`` ones (``bench``'s export to ``-`` of the commands done). A terminal
    paused with ^S took them in a blocking write, so a ``kill -TERM`` from elsewhere left the
    runner waiting for a ^Q nobody was there to type (Ctrl-C typed on it restarts its output).
    A pipe, socket or file keeps its rules: a reader merely slow after a stop (``| tee`` stalled,
    ``| less`` on its first page) gets the whole results, as hyperfine's blocking writes give."""
    _stop_came[:] = [True]
    for fd in (1, 2):
        if os.isatty(fd):  # a closed one is none: nothing of the runner's goes there
            found = os.fstat(fd)
            _doubted.add((found.st_dev, found.st_ino))


def reads_again(target: tuple[int, int]) -> None:
    """The reader of ``target`` took bytes of a later run's echo since ``given_up``: the echo is
    waited for again, as any is; the runner's own lines there within OWN_STALL_SECONDS."""
    _stalled.discard(target)


def is_given_up(target: tuple[int, int]) -> bool:
    """Whether ``given_up`` marked the file ``target``."""
    return target in _stalled


def write_own(fd: int, data: bytes, shared: bool = False) -> int:
    """The runner's own words on its stdout or stderr; how many bytes of ``data`` went in.

    A write that waits for the reader as a blocking one would (``write_all``; a terminal paused by
    ^S, a reader slow to start get it all, as the reference's blocking writes do), until the
    runner doubts that reader (``doubt``, ``given_up``): then each write waits at most
    OWN_STALL_SECONDS for a byte taken, and a write that waits it out gives the file up. Once
    given up, each write is one that does not wait, and what the file does not take at once is
    dropped: the runner's tail costs that one bound in all, not one a line. A ``shared`` line (one
    the reference or hyperfine writes too: the error line, bench's printout) on a terminal the
    echo gave up is written whole, as their blocking writes do: a user paused it (^S) and reads it
    after ^Q; a line of processkit's only (a warning) keeps the bound, so a terminal nobody reads
    (a pty's unread master) never holds a run the reference ends; nor does a stop's cancel line
    (``cli.main.render_failure``), nor any line once a stop came (``doubt_own``). A reader gone raises
    (``BrokenPipeError``), as any failed write."""
    found = os.fstat(fd)
    target = (found.st_dev, found.st_ino)
    if target not in _doubted or _never_held(fd, found.st_mode):  # the set first: no ioctl a line
        write_all(fd, data)
        return len(data)
    if shared and stat.S_ISCHR(found.st_mode) and not _stop_came:  # a terminal (_never_held: no other device here)
        write_all(fd, data)
        return len(data)
    done = _unwaited(fd, found.st_mode, data, 0.0 if target in _stalled else OWN_STALL_SECONDS)
    if done < len(data):
        given_up(target)  # its bound waited out: the runner's later words there wait no more
    return done


def private_writer(fd: int) -> int:
    """A private non-blocking description of what ``fd`` writes to (a pipe, FIFO or terminal),
    reopened through ``/proc/self/fd``: its ``O_NONBLOCK`` is its own, so the shared one's is
    never touched, and no other writer of the shared one can take its room. Raises ``OSError``
    (no ``/proc``; the reopen refused, as for a pipe another user made, mode 0600)."""
    return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)


def _taken_privately(fd: int, mode: int, data, bound: float) -> int:
    """``_taken`` for a blocking pipe, FIFO or terminal: on a private non-blocking description
    (``private_writer``), so no other writer of the shared one taking the room ``poll`` saw can
    make a write wait; where none is had (no ``/proc``, the reopen refused), on the shared one,
    only the piece ``poll`` promises room for (``_if_room``)."""
    try:
        private = private_writer(fd)
    except OSError:
        piece = PIPE_PIECE if stat.S_ISFIFO(mode) else TERMINAL_PIECE
        return _taken(lambda chunk: _if_room(fd, chunk), fd, data, piece, bound)
    try:
        return _taken(lambda chunk: os.write(private, chunk), fd, data, MAX_WRITE, bound)
    finally:
        os.close(private)


def _sent(fd: int, data: bytes, piece: int, bound: float) -> int:
    """``_taken`` for the socket ``fd``: each send one that does not wait (``MSG_DONTWAIT``), on a
    duplicate, so the shared description's flags stay as they are."""
    import socket

    with socket.socket(fileno=os.dup(fd)) as sock:
        return _taken(lambda chunk: sock.send(chunk, socket.MSG_DONTWAIT), fd, data, piece, bound)


def _never_held(fd: int, mode: int) -> bool:
    """A regular file or a character device that is no terminal (``/dev/null``): a write to it
    never waits for a reader."""
    return stat.S_ISREG(mode) or (stat.S_ISCHR(mode) and not os.isatty(fd))


def _taken(send, fd: int, data: bytes, piece: int, bound: float) -> int:
    """How much of ``data`` ``send`` took, ``piece`` bytes at most at a time: what it takes
    before it would wait, then more each time ``fd`` polls writable, until the reader took nothing
    for ``bound`` seconds (0: no wait)."""
    import select
    import time

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    view = memoryview(data).cast("B")
    done = 0
    deadline = time.monotonic() + bound
    while done < len(view):
        try:
            count = send(view[done : done + piece])
        except BlockingIOError:
            count = 0
        if count > 0:
            done += count
            deadline = time.monotonic() + bound
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not waiting.poll(max(1, int(left * 1000))):
            break
    return done


def _if_room(fd: int, chunk: memoryview) -> int:
    """``chunk`` written to a blocking ``fd`` if it polls writable now, else ``BlockingIOError``."""
    import select

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    if not waiting.poll(0):
        raise BlockingIOError(errno.EAGAIN, "no room")
    return os.write(fd, chunk)
