"""``batch``'s live output (the job lines and bar on stderr, ``--show-output``'s blocks on
stdout, the batch's warnings) written from the batch's loop without ever waiting in a write.

A reader that stalls (a pipe nobody drains, a paused pager) must not hold the loop: while a
write waited for it, no job's deadline fired and a stop signal was only noted. So once the
batch's loop turns, each stream goes through the engine's ``EchoSink``, the one a run's live
echo uses: a private non-blocking description of the same pipe or terminal reopened through
``/proc/self/fd`` (the shared description's ``O_NONBLOCK`` is never changed: a parent or a
sibling sharing it, a shell or a Node.js parent, would see its own writes fail or block), or,
where that reopen is refused, the shared blocking one written only as far as ``poll`` promises
it will not block; what the reader cannot take yet waits in the sink's bounded backlog and goes
when the loop sees the descriptor writable.

Both streams share one ordered queue: an item goes only once every earlier item of either
stream is out (its bytes taken by the reader, not merely in its sink), as blocking writes would
go. Read together (``2>&1 | cat``, a terminal), a job's stdout block is never cut by a stderr
line written after it, nor a terminal's bar drawn inside it; a stalled stdout holds the later
stderr lines, never the loop. The batch's warnings (``diagnostics``) join the same queue while
it is attached.

Nothing is lost while the reader is merely slow: a job's captured output is queued as its file,
with its header as one item, read a chunk at a time only as the sink has room, so memory stays
bounded by the sink's backlog and the queue (PENDING_MOST items; an item that finds it full is
dropped with all its stream would say after, said once, the batch's deadlines and signals
working on). When the jobs are done the batch's loop keeps turning for the readers, as long as a
blocking write would wait for them (``drain``; the shell's ``| less`` read a page at a time), but
a stop signal ends the wait. Before the loop turns, writes wait for the reader as a blocking
write does, until a stop signal came, then STALL_SECONDS at most (``writeall.write_till_stopped``;
a Dask batch's lines, whose client has no loop of the batch's: a blocking write would hold its
stop, to a stderr nobody reads).

When the loop closes, the order across streams no longer matters: it only did while both reach
one reader, and then neither was stalled (the queue drained) or the batch was stopped. What is
left of each stream (its sink's backlog, its block being copied, its queued items, in order) is
written straight to it, stderr first (the job lines, then the summary and the failure list
written after: the user's only record of which jobs failed or were cancelled), so a stdout
stalled behind its own backlog never costs stderr its lines. The queue's bound is the loop's
alone: a stream dropped for it speaks again once the loop closed. After a stop (or a failure)
every write is bounded as ``write_till_stopped``'s are after a stop: a reader merely slow gets
every byte (a stdout dropped at once cut a ``--show-output`` block mid-line, unsaid), one that
takes nothing for ``STALL_SECONDS`` loses the rest of its stream, said once for stdout on stderr,
so a stop never hangs on a stalled reader; after a drained batch they wait as a blocking write
would. They go through the sink's private non-blocking description where it had
one (a pipe, FIFO or terminal), which is what lets a wait be bounded at all; where it had none
(a socket, a refused reopen) through the shared one, each write one that cannot block (a
socket's ``MSG_DONTWAIT``, a blocking pipe's piece that ``poll`` promises room for).
"""

from __future__ import annotations

import errno
import _thread
import os
from collections import deque

from .. import diagnostics
from ..bounded import RUN_FILE, open_input
from ..engine.echo import READER_GONE, EchoSink
from ..useroutputs import STALL_SECONDS
from ..writeall import given_up, write_all, write_bounded, write_till_stopped

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..engine.host import Host

READ_CHUNK = 1 << 18  # a capture file is read this much at a time into the sink
PENDING_MOST = 1 << 16  # items (texts and blocks) queued behind a reader: past it, dropped


class _Sink(EchoSink):
    """An ``EchoSink`` that also calls back once its backlog is all out: the other stream's
    next item waits for that. It tells ``diagnostics`` no line end (``tells_line_end=False``):
    what it leaves queued when the batch's loop closes is written straight (``LiveOutput``'s
    rest), never through it, so the last byte it told would go stale."""

    def _on_writable(self) -> None:
        super()._on_writable()
        if not self.backlog:
            self._on_room()


class Stream:
    """One of the batch's standard streams, by descriptor; its items go through ``LiveOutput``'s
    one queue."""

    def __init__(self, output: LiveOutput, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name
        self._output = output
        self.gone = False  # its reader went away, or a write failed: nothing more is written
        self.dropped = False  # an item of it found the queue full: it and all later ones dropped (said once)
        self.sink: _Sink | None = None  # while the batch's loop turns
        self.queued = 0  # its items in the queue
        self.after = -1  # once the loop closed: the sink's private non-blocking description (-1: none, ``fd``)

    def write(self, data: bytes) -> None:
        self._output.queue(self, data)

    def copy(self, path: str, header: bytes) -> None:
        """``header``, then the bytes of the file at ``path``, ending with a newline if they did
        not: one item, so a header is never shown without its block."""
        self._output.queue(self, (header, path))

    @property
    def waiting(self) -> bool:
        """Whether anything of it is still to reach its reader."""
        return self._output.holds(self)


def _opened(path: str) -> int:
    """A capture file, opened for reading as every user-named input is (-1: gone)."""
    try:
        return open_input(path, RUN_FILE)
    except (OSError, ValueError):  # ValueError: bounded.InputError
        return -1


class LiveOutput:
    """The batch's stdout and stderr, on its loop while it turns (``run_batch``'s ``output``)."""

    def __init__(self, stdout: int, stderr: int) -> None:
        self.stdout = Stream(self, stdout, "stdout")
        self.stderr = Stream(self, stderr, "stderr")
        self._pending: deque = deque()  # (stream, bytes or (header, capture path)), in the order written
        self._at: Stream | None = None  # whose item went last: its sink's backlog goes out before another's item
        self._file = -1  # the capture file being read into ``_at``'s sink
        self._last = b""  # its last byte so far: a block that did not end a line gets a newline
        self._stall: float | None = None  # the bound of a write after the loop turned (None: as a blocking write)
        self.before_said: Callable[[], None] | None = None  # the bar taken away before a warning (``Progress``)
        # held while the bar is drawn or a warning takes its place: the one thread that is not the
        # batch's (a Dask client's no-worker watcher) warns while the main one may draw
        self.drawing = _thread.RLock()

    def attach(self, host: Host) -> None:
        for stream in (self.stdout, self.stderr):
            stream.sink = _Sink(host.loop, stream.fd, self._pump, tells_line_end=False)
        self._stall = STALL_SECONDS  # until ``drain`` sees the readers keep up

    def route(self) -> None:
        """The batch's warnings and notes (``diagnostics``) come here from now until ``release``:
        before the loop turns (or with none: a Dask batch's) as after it, the bar goes first."""
        diagnostics.route(self._said)

    def _said(self, text: str) -> None:
        """A warning or note of the batch's (``diagnostics``), in order with the rest, on a row of
        its own: the bar below the job lines is taken away first (it comes back at its next draw).
        Under ``drawing``: a Dask client's watcher thread says its warning here too."""
        with self.drawing:
            if self.before_said is not None:
                self.before_said()
            self.stderr.write(text.encode("utf-8", "backslashreplace"))

    def queue(self, stream: Stream, item: bytes | tuple[bytes, str]) -> None:
        if stream.gone or stream.dropped:
            return
        if stream.sink is None:
            self._direct(stream, item)
            return
        if len(self._pending) >= PENDING_MOST:  # after the items kept: the queue past its bound by one
            stream.dropped = True
            said = f"processkit-cli: warning: batch: its readers fell {PENDING_MOST} writes behind: nothing more of its {stream.name} is shown\n"
            if not self.stderr.gone:
                self._append(self.stderr, said.encode())
            return
        self._append(stream, item)
        self._pump()

    def _append(self, stream: Stream, item: bytes | tuple[bytes, str]) -> None:
        self._pending.append((stream, item))
        stream.queued += 1

    def _direct(self, stream: Stream, item: bytes | tuple[bytes, str]) -> None:
        """Written straight to the stream (no loop to wait on); a write that fails or stalls
        ends the stream."""
        try:
            if isinstance(item, bytes):
                self._write(stream, item)
                return
            header, path = item
            self._write(stream, header)
            self._file = _opened(path)
            self._copy_rest(stream)
        except OSError as exc:
            self._close_file()
            self._lost(stream, exc)

    def _lost(self, stream: Stream, error: int | OSError) -> None:
        """Nothing more is written to ``stream``. A write that failed (a full disk) is said once,
        on stderr, as ``run`` says its broken echo: the blocks were lost without a word, the exit
        0. Not a reader's own doing (``READER_GONE``), as for ``run``, nor on a stderr that is gone;
        stdout's reader that took nothing for the bound of a write after a stop (``ETIMEDOUT``) is
        said too: the rest of a block was dropped. Once the loop closed
        it goes through ``_said`` still, so its write is bounded as ``close``'s are: a stop never
        hangs on a stalled stderr."""
        if stream.gone:
            return
        stream.gone = True
        code = (error.errno or 0) if isinstance(error, OSError) else error
        if code in READER_GONE or stream is self.stderr or self.stderr.gone:
            return
        name = stream.name
        if code == errno.ETIMEDOUT:  # after a stop (or a failure) alone: a reader merely slow was waited for
            said = f"batch: its {name}'s reader took nothing for {STALL_SECONDS:g}s after the stop: the rest of its {name} is dropped"
        else:
            why = error.strerror if isinstance(error, OSError) and error.strerror else os.strerror(code)
            said = f"batch: a write to its {name} failed ({why}): nothing more of its {name} is shown"
        before = diagnostics.route(self._said)  # not routed (before the loop): straight would wait unbounded
        try:  # ``diagnostics`` decides whether it is said at all (``--error-format json``: not)
            diagnostics.warn(said)
        finally:
            diagnostics.route(before)

    def _write(self, stream: Stream, data: bytes) -> None:
        """One whole write, or OSError: before the loop, as a blocking write; after it, on the
        private description where there is one, else on the shared one, bounded as ``close``
        says; a bounded write given up marks its file (``writeall.given_up``)."""
        try:
            if stream.after >= 0:
                write_all(stream.after, data, self._stall)
            elif self._stall is None:  # as a blocking write, but a stop ends the wait (a Dask batch's lines)
                write_till_stopped(stream.fd, data, STALL_SECONDS)
            else:
                write_bounded(stream.fd, data, self._stall)
        except TimeoutError:  # its reader stalled: the runner's later words there wait no more
            found = os.fstat(stream.fd)
            given_up((found.st_dev, found.st_ino))
            raise

    def _copy_rest(self, stream: Stream) -> None:
        """The rest of the capture file being read, straight to ``stream``."""
        while self._file >= 0:
            self._read_one(lambda chunk: self._write(stream, chunk))

    def _pump(self) -> None:
        """Items to their sinks, in order, while they have room: a sink calls this again once it
        has room after being full, and once its backlog is all out."""
        while True:
            at = self._at
            sink = at.sink if at is not None else None
            if at is not None and (sink is None or sink.broken):
                self._close_file()
                self._at = None
                self._lost(at, sink.error if sink is not None else 0)  # the rest of its items are skipped
                continue
            if sink is not None and self._file >= 0:
                if sink.full:
                    return
                self._read_one(sink.write)
                continue
            if not self._pending:
                return
            stream, item = self._pending[0]
            if stream.gone:
                self._take()
                continue
            if sink is not None and stream is not at and sink.backlog:
                return  # the other stream's bytes first: ``_Sink`` calls back once they are out
            own = stream.sink
            if own is None:
                return  # closed
            if own.full:
                return
            self._take()
            self._at = stream
            if isinstance(item, bytes):
                own.write(item)
                continue
            header, path = item
            if header:
                own.write(header)
            self._file = _opened(path)

    def _take(self) -> None:
        stream, _ = self._pending.popleft()
        stream.queued -= 1

    def _read_one(self, send) -> None:
        try:
            chunk = os.read(self._file, READ_CHUNK)
        except OSError:
            chunk = b""  # an unreadable capture: its block ends here, as a missing one has none
        if chunk:
            self._last = chunk[-1:]
            send(chunk)
            return
        ended, self._last = self._last, b""
        self._close_file()
        if ended and ended != b"\n":
            send(b"\n")

    def _close_file(self) -> None:
        if self._file >= 0:
            os.close(self._file)
            self._file = -1
        self._last = b""

    def holds(self, stream: Stream) -> bool:
        """Whether anything of ``stream`` is still to reach its reader."""
        sink = stream.sink
        if sink is None or sink.broken or stream.gone:
            return False
        return bool(sink.backlog or stream.queued or (self._at is stream and self._file >= 0))

    def drain(self, host: Host) -> None:
        """The jobs are done: the loop turns on while anything waits for a reader, as a
        blocking write would wait, but a stop signal ends the wait (``close`` then writes what
        is left, each write bounded): nothing else is due by then."""
        streams = (self.stdout, self.stderr)
        while host.stop_source is None and any(stream.waiting for stream in streams):
            host.loop.run_once()
        if host.stop_source is None:
            self._stall = None  # the readers kept up: the batch's end waits for them as a blocking write would

    def close(self) -> None:
        """The loop is closing: what is left goes straight to each stream, stderr first (the
        module's docstring says why), and later writes go the same way; the batch's warnings
        still come here until ``release`` (the bar taken away before each, its writes bounded)."""
        at, self._at = self._at, None
        file, last = self._file, self._last
        self._file, self._last = -1, b""
        pending, self._pending = self._pending, deque()
        for stream in (self.stderr, self.stdout):
            sink, stream.sink = stream.sink, None
            stream.queued = 0
            stream.dropped = False  # the queue's bound was the loop's: what comes now is written
            if sink is None:
                continue
            stream.after = sink.detach()
            if sink.broken:
                self._lost(stream, sink.error)
            try:
                while sink.backlog and not stream.gone:
                    chunk = b"".join(sink.backlog.head())
                    sink.backlog.consume(len(chunk))
                    self._write(stream, chunk)
                if at is stream and file >= 0 and not stream.gone:
                    self._file, self._last, file = file, last, -1
                    self._copy_rest(stream)
            except OSError as exc:
                self._close_file()
                self._lost(stream, exc)
            sink.backlog.clear()
            for owner, item in pending:
                if owner is stream and not stream.gone:
                    self._direct(stream, item)
        if file >= 0:
            os.close(file)

    def release(self) -> None:
        """The batch has said everything: the private descriptions kept for it closed, and the
        process's warnings straight to stderr again."""
        diagnostics.route(None)
        for stream in (self.stdout, self.stderr):
            if stream.after >= 0:
                os.close(stream.after)
                stream.after = -1
