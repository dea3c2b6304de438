"""Live echo to the runner's own stdout/stderr that never blocks the loop.

The runner's inherited handles are shared with its caller, so their ``O_NONBLOCK`` flag must
not be touched. Instead: a pipe, FIFO or terminal is reopened through ``/proc/self/fd/N``,
which yields a private file description that can be non-blocking; a socket is written with
``MSG_DONTWAIT``; a regular file never blocks for long and is written as it is. Where the reopen
is refused (a pipe another user made, mode 0600, reopened by a runner of another uid; no
``/proc``) and the shared description blocks, the echo is ``gated``: written here alone (no
splice, no write by the native pump) and only what cannot block, a pipe's ``PIPE_BUF`` once
``poll`` says it is writable (the kernel then has room for that much), a terminal's
``TERMINAL_PIECE``.

Bytes the consumer cannot take yet wait in a bounded backlog. When the backlog is full the
pump stops reading the child (honest backpressure) while the loop keeps serving everything
else. The backlog is a queue of the chunks as they came: a consumer behind a 64 KiB pipe takes
a few KiB per wakeup, and a flat buffer consumed at the front and grown at the back would move
everything queued on each append, which made echoing into ``| cat`` cost most of the runner's
CPU (bench/README.md, "After the splice path and the chunked echo backlog").
"""

from __future__ import annotations

import errno
import os
import stat

from .. import diagnostics
from ..writeall import PIPE_PIECE, TERMINAL_PIECE, is_given_up, private_writer, reads_again
from .waits import wait_until

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections import deque
    from typing import Callable

    from ..loop import Loop

BACKLOG_LIMIT = 4 * 1024 * 1024
WRITE_CHUNKS = 64  # queued chunks offered to the consumer per write (one writev / sendmsg)
# A sink's ``error`` that no one says: none, or its reader went away (``| head -1``; a socket's peer
# that closed with bytes unread): its choice, as a pipe's writer is not told of it either.
READER_GONE = (0, errno.EPIPE, errno.ECONNRESET)
NEVER = float("-inf")  # an ``EchoSink.took_at`` before its reader took anything


def _deque() -> type[deque]:
    """The C type itself: the collections package and its imports would weigh on every plain run's
    start-up for one class (the cost: bench/README.md, "Start-up: the launcher's finder"), and even
    ``_collections`` is imported only by a first queued chunk (~0.3 M instructions: "Start-up
    (issue 49, start65)"), which a run whose echo keeps up never has."""
    try:
        from _collections import deque  # type: ignore[import-not-found] # the C type: no stub of its own
    except ImportError:  # an interpreter without CPython's _collections
        from collections import deque
    return deque


_NONE_QUEUED = ()  # a backlog's chunks until its first: read as an empty deque reads


class Backlog:
    """Queued bytes as a deque of chunks (``_NONE_QUEUED`` until the first); ``len()`` counts bytes."""

    def __init__(self) -> None:
        self._chunks: deque[memoryview] = _NONE_QUEUED  # type: ignore[assignment] # read only as a deque's empty
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def append(self, data) -> None:
        """Queue a copy of ``data`` (the pumps reuse their read buffers)."""
        if data:
            if self._chunks is _NONE_QUEUED:
                self._chunks = _deque()()
            self._chunks.append(memoryview(bytes(data)))
            self._size += len(data)

    def head(self) -> list[memoryview]:
        """The first chunks, in order, for one vectored write."""
        return [self._chunks[index] for index in range(min(WRITE_CHUNKS, len(self._chunks)))]

    def consume(self, count: int) -> None:
        """Drop the first ``count`` bytes (what a write took)."""
        self._size -= count
        chunks = self._chunks
        while count:
            first = chunks[0]
            if count < len(first):
                chunks[0] = first[count:]
                return
            count -= len(first)
            chunks.popleft()

    def clear(self) -> None:
        self._chunks = _NONE_QUEUED  # type: ignore[assignment] # as made
        self._size = 0


def _is_null(found: os.stat_result) -> bool:
    """``/dev/null``: no line there is ever read, so none needs starting (and its echo may splice)."""
    return stat.S_ISCHR(found.st_mode) and found.st_rdev == os.makedev(1, 3)


class EchoSink:
    def __init__(self, loop: Loop, fd: int, on_room: Callable[[], None], tells_line_end: bool = True):
        """``tells_line_end``: whether, writing into the file the runner's stderr writes to, it
        tells ``diagnostics`` the last byte it wrote there (a writer whose bytes may also reach
        that file another way, never seen here, passes False)."""
        self.loop = loop
        self._on_room = on_room
        self._owned_fd = -1
        self._socket: socket.socket | None = None
        self.is_socket = False
        # A pipe, FIFO or character device, not the stderr's file told of: the native pump may splice.
        self.splices = False
        self.gated = False  # a shared blocking description: written here alone, only what cannot block
        self.terminal = False  # a character device (a terminal: a person who pauses it with ^S reads again)
        self.broken = False
        self.error = 0  # the errno of the write that broke the echo: said once the run is over
        self.target: tuple[int, int] | None = None  # (st_dev, st_ino) of what it echoes into: said once each
        self.backlog = Backlog()
        self.flushed = 0  # backlog bytes written so far: flush_backlogs()'s progress, which refills cannot mask
        # When its reader last took bytes of it (any write: from the backlog, direct, the native
        # pump's own), on the loop's turn's clock: its file's stall clock restarts there
        # (``StallClock``), and a file given up before (``writeall``) reads again. NEVER: none yet.
        self.took_at = NEVER
        # It writes into the file the runner's stderr writes to (its own stderr, or a stdout that
        # is the same file: ``2>&1``): the last byte it writes says whether the runner's next line
        # needs a newline first (diagnostics.echoed). Never spliced (bytes the runner never sees).
        self.tells_line_end = False
        try:
            found = os.fstat(fd)
        except OSError:
            self.fd = -1
            self.broken = True
            return
        mode = found.st_mode
        self.terminal = stat.S_ISCHR(mode)
        self.target = (found.st_dev, found.st_ino)
        if tells_line_end:
            try:
                stderr = os.fstat(2)
                self.tells_line_end = self.target == (stderr.st_dev, stderr.st_ino) and not _is_null(found)
            except OSError:  # no stderr: no line of ours to start
                pass
        self.fd = fd
        if stat.S_ISSOCK(mode):
            self.is_socket = True
            import socket  # only for an echo into a socket: most runs never need the module

            self._socket = socket.socket(fileno=os.dup(fd))
            self._dontwait = socket.MSG_DONTWAIT
        elif not stat.S_ISREG(mode):
            self.splices = not self.tells_line_end
            try:
                self._owned_fd = private_writer(fd)
                self.fd = self._owned_fd
            except OSError:  # no private description to be had: the shared one, never blocked on
                if os.get_blocking(fd):
                    import select  # only for this rare echo

                    self.splices = False
                    self.gated = True
                    self._piece = PIPE_PIECE if stat.S_ISFIFO(mode) else TERMINAL_PIECE
                    self._poll = select.poll()
                    self._poll.register(fd, select.POLLOUT)

    @property
    def full(self) -> bool:
        return len(self.backlog) >= BACKLOG_LIMIT

    def write(self, data) -> None:
        if self.broken:
            return
        if self.backlog:
            self.backlog.append(data)
            return
        written = self._write_some([data])
        if written < len(data) and not self.broken:
            self.queue(data[written:])

    def queue(self, data) -> None:
        """Append bytes that could not be written now; they go out as the consumer drains."""
        if self.broken:
            return
        if not self.backlog:
            self.loop.add_writer(self.fd, self._on_writable)
        self.backlog.append(data)

    def _write_some(self, pieces: list) -> int:
        """Write what the consumer takes of ``pieces`` (in order) without blocking."""
        try:
            if self._socket is not None:
                written = self._socket.sendmsg(pieces, (), self._dontwait)
            elif self.gated:
                written = self._write_gated(pieces)
            else:
                written = os.writev(self.fd, pieces)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as error:
            self.abandon(error.errno or 0)
            return 0
        if written:
            self.took_at = self.loop.now
        if written and self.tells_line_end:
            left = written
            for piece in pieces:
                if left <= len(piece):
                    diagnostics.echoed(piece[left - 1])
                    break
                left -= len(piece)
        return written

    def _write_gated(self, pieces: list) -> int:
        """Write ``pieces`` in order, a ``_piece`` at a time, while ``poll`` says one fits."""
        written = 0
        for piece in pieces:
            at = 0
            while at < len(piece):
                if not self._poll.poll(0):
                    return written
                count = os.write(self.fd, piece[at : at + self._piece])
                at += count
                written += count
        return written

    def abandon(self, error: int = 0) -> None:
        """The consumer is gone (EPIPE), failing (``error``, its errno) or stalled: stop echoing,
        keep everything else. The private description (or a socket's duplicate) is let go at once:
        nothing writes it any more (the pumps look at ``broken`` first)."""
        self.broken = True
        self.error = self.error or error
        if self.backlog:
            self.loop.remove_writer(self.fd)
            self.backlog.clear()
            self._on_room()
        self._let_go()

    def _on_writable(self) -> None:
        was_full = self.full
        written = self._write_some(self.backlog.head())
        self.backlog.consume(written)
        self.flushed += written
        if not self.backlog:
            self.loop.remove_writer(self.fd)
        if was_full and not self.full:
            self._on_room()

    def detach(self) -> int:
        """Off the loop, for a caller that writes the rest itself (a batch's live output once its
        loop closed): the private non-blocking description, if there was one, returned open for
        it to write and close (-1: none), and the backlog kept."""
        fd, self._owned_fd = self._owned_fd, -1
        self.close()
        return fd

    def close(self) -> None:
        if self.backlog:
            self.loop.remove_writer(self.fd)
        self._let_go()

    def _let_go(self) -> None:
        """The private description (a reopened one, or a socket's duplicate) closed, once."""
        if self._owned_fd >= 0:
            os.close(self._owned_fd)
            self._owned_fd = -1
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class StallClock:
    """A stall clock for each file the echoes of a run's drain write into (``EchoSink.target``):
    a file's reader is judged on its own evidence, so an echo into a pipe nobody reads stalls one
    bound on (``stalled``) whatever a slow but live reader of another file takes meanwhile, and
    the echoes into one file (stdout and stderr into one pipe, one terminal) share its reader's
    patience: bytes taken from either restart the file's clock, and they stall once, together. A
    file's clock starts at a look that finds none of its echoes holding bytes (the first: the
    root's exit, or the drain), and restarts at every write its reader takes of any echo into it
    (``EchoSink.took_at``: from a backlog, or direct, Python's or the native pump's own write or
    splice; a reader that took some during the wait for a descendant's pipes and then stopped is
    given one bound from its last byte, not from the look at the drain). A file whose reader the
    runner gave up already (``writeall.is_given_up``: an earlier run of a ``bench`` into the same
    stdout) gets no bound, but a terminal (its reader paused it with ^S, and reads again once it
    lets it go), until a look finds an echo into it took bytes (during the run or the drain): it
    is waited for again (``writeall.reads_again``)."""

    def __init__(self, echoes: list[EchoSink], seconds: float, clock: Callable[[], float]):
        self.echoes = echoes
        self._seconds = seconds
        self.clock = clock
        self._starts: dict[object, float] = {}  # a file's clock's start, but for the writes its reader took since
        # The files given up before get no bound; never a terminal: the person who paused it reads again.
        self._given_up = {echo.target for echo in echoes if echo.target and is_given_up(echo.target)}
        self._terminals = {echo.target for echo in echoes if echo.terminal}
        self._read_again()

    def _read_again(self) -> None:
        """The files given up before whose reader took bytes of an echo since: waited for again."""
        for echo in self.echoes:
            if echo.took_at != NEVER and echo.target in self._given_up:
                self._given_up.discard(echo.target)
                reads_again(echo.target)

    def flushed(self) -> int:
        return sum(echo.flushed for echo in self.echoes)

    def pending(self, echoes: list[EchoSink] | None = None) -> list[EchoSink]:
        """The echoes (of ``echoes``, else all) that still hold bytes for a live consumer."""
        return [echo for echo in (self.echoes if echoes is None else echoes) if echo.backlog and not echo.broken]

    def limits(self) -> dict[object, float]:
        """When each file an echo still holds bytes for counts as stalled, on the loop's clock."""
        self._read_again()
        unbounded = self._given_up - self._terminals
        now, held = self.clock(), {_file(echo) for echo in self.pending()}
        taken: dict[object, float] = {}  # when a file's reader last took bytes of any echo into it
        for echo in self.echoes:
            taken[_file(echo)] = max(taken.get(_file(echo), NEVER), echo.took_at)
        limits: dict[object, float] = {}
        for file, last in taken.items():
            if file not in held:
                self._starts[file] = now
            else:
                start = self._starts.setdefault(file, now)
                limits[file] = max(start, last) + (0.0 if file in unbounded else self._seconds)
        return limits

    def limit(self, echoes: list[EchoSink]) -> float:
        """When the first file of ``echoes`` still holding bytes counts as stalled."""
        limits = self.limits()
        return min((limits[_file(echo)] for echo in self.pending(echoes)), default=self.clock())

    def stalled(self) -> list[EchoSink]:
        """The echoes holding bytes for a file whose reader took nothing for its whole bound."""
        limits, now = self.limits(), self.clock()
        return [echo for echo in self.pending() if limits[_file(echo)] <= now]


def _file(echo: EchoSink) -> object:
    """What ``StallClock`` keys an echo's reader by: the file it echoes into (None: its own)."""
    return echo.target if echo.target is not None else id(echo)


def flush_backlogs(stall: StallClock, echoes: list[EchoSink], deadline: float, stop: Callable[[], bool]):
    """At the end of a run: keep writing ``echoes``' backlogs while their consumers make progress
    (a run's steps: ``yield from``; the host's loop does the writing meanwhile, for every run).

    Returns once a file of theirs stalls (``stall.stalled()`` names its echoes), at the monotonic
    ``deadline`` (a consumer that takes a little at a time while the pipe refills the backlog
    would otherwise keep it going for ever), or once ``stop()`` (a stop signal); returns whether a
    backlog is left unsent.
    """
    clock = stall.clock
    while stall.pending(echoes) and not stop() and clock() < deadline:
        limit = stall.limit(echoes)
        if clock() >= limit:
            break
        before = stall.flushed()
        # noqa reasons: a named predicate read only within this iteration of the loop.
        progressed = lambda: stall.flushed() > before or not stall.pending(echoes) or stop()  # noqa: E731, B023
        yield from wait_until(progressed, min(limit, deadline))
    return bool(stall.pending(echoes))
