"""``batch``'s live output (the job lines and bar on stderr, ``--show-output``'s blocks on
stdout) written from the batch's loop without ever waiting in a write.

A reader that stalls (a pipe nobody drains, a paused pager) must not hold the loop: while a
write waited for it, no job's deadline fired and a stop signal was only noted. So once the
batch's loop turns, each stream goes through the engine's ``EchoSink``, the one a run's live
echo uses: a private non-blocking description of the same pipe or terminal reopened through
``/proc/self/fd`` (the shared description's ``O_NONBLOCK`` is never changed: a parent or a
sibling sharing it, a shell or a Node.js parent, would see its own writes fail or block), or,
where that reopen is refused, the shared blocking one written only as far as ``poll`` promises
it will not block; what the reader cannot take yet waits in the sink's bounded backlog and goes
when the loop sees the descriptor writable.

Nothing is lost while the reader is merely slow: a job's captured output is queued as its file,
read a chunk at a time only as the sink has room, so memory stays bounded by the sink's backlog
and the queue of blocks (PENDING_MOST; past it, what comes is dropped with one warning, the
batch's deadlines and signals working on). When the jobs are done the batch's loop keeps
turning for the readers, as long as a blocking write would wait for them (``drain``; the shell's
``| less`` read a page at a time), but a stop signal ends the wait, and what is left is dropped
with all that stream would have said after (the summary included: it would wait for that reader). Before the loop
turns and after it closed (the summary; a Dask batch's lines), writes wait for the reader as a
blocking write does (``writeall``).
"""

from __future__ import annotations

import os

from ..bounded import RUN_FILE, open_input
from ..writeall import write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import deque

    from ..engine.echo import EchoSink
    from ..engine.host import Host
    from ..loop import Loop
else:
    from collections import deque

READ_CHUNK = 1 << 18  # a capture file is read this much at a time into the sink
PENDING_MOST = 1 << 16  # blocks (texts and files) queued behind a reader: past it, dropped


class Stream:
    """One of the batch's standard streams, by descriptor."""

    def __init__(self, fd: int, name: str, warned: Stream | None = None) -> None:
        self.fd = fd
        self.name = name
        self._warned = warned or self  # where the drop is said: in order, after what came before it
        self.gone = False  # its reader went away, or a write failed: nothing more is written
        self._sink: EchoSink | None = None  # while the batch's loop turns
        self._pending: deque = deque()  # bytes, or a capture file's path
        self._file = -1  # the capture file being read into the sink
        self._last = b""  # its last byte so far: a block that did not end a line gets a newline
        self._dropped = False  # PENDING_MOST was passed (warned once)

    def attach(self, loop: Loop) -> None:
        from ..engine.echo import EchoSink

        self._sink = EchoSink(loop, self.fd, self._pump)

    def detach(self) -> None:
        """The loop is closing: what still waits is dropped (``drain`` waited for it)."""
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.close()
        self._pending.clear()
        self._close_file()

    def write(self, data: bytes) -> None:
        self._queue(data)

    def copy(self, path: str) -> None:
        """The bytes of the file at ``path``, ending with a newline if they did not."""
        self._queue(path)

    def _queue(self, item: bytes | str) -> None:
        if self.gone:
            return
        if self._sink is None:
            self._direct(item)
            return
        if len(self._pending) >= PENDING_MOST:
            if not self._dropped:  # said once, after the blocks kept (its queue past the bound by one)
                self._dropped = True
                said = f"processkit-cli: warning: batch: its {self.name}'s reader fell {PENDING_MOST} blocks behind: later ones dropped\n"
                self._warned._pending.append(said.encode())
                self._warned._pump()
            return
        self._pending.append(item)
        self._pump()

    def _direct(self, item: bytes | str) -> None:
        """Written as a blocking write would (no loop to wait on)."""
        try:
            if isinstance(item, bytes):
                write_all(self.fd, item)
                return
            self._file = _opened(item)
            while self._file >= 0:
                self._read_one(lambda chunk: write_all(self.fd, chunk))
        except OSError:
            self.gone = True
            self._close_file()

    def _pump(self) -> None:
        """Into the sink while it has room: the sink calls this again once it has room after
        being full."""
        sink = self._sink
        if sink is None:
            return
        while not sink.broken and not sink.full and (self._file >= 0 or self._pending):
            if self._file >= 0:
                self._read_one(sink.write)
                continue
            item = self._pending.popleft()
            if isinstance(item, bytes):
                sink.write(item)
            else:
                self._file = _opened(item)
        if sink.broken:
            self.gone = True
            self._pending.clear()
            self._close_file()

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

    @property
    def waiting(self) -> bool:
        """Whether anything is still to reach the reader."""
        sink = self._sink
        return sink is not None and not sink.broken and bool(self._pending or self._file >= 0 or sink.backlog)


def _opened(path: str) -> int:
    """A capture file, opened for reading as every user-named input is (-1: gone)."""
    try:
        return open_input(path, RUN_FILE)
    except (OSError, ValueError):  # ValueError: bounded.InputError
        return -1


class LiveOutput:
    """The batch's stdout and stderr, on its loop while it turns (``run_batch``'s ``output``)."""

    def __init__(self, stdout: int, stderr: int) -> None:
        self.stderr = Stream(stderr, "stderr")
        self.stdout = Stream(stdout, "stdout", self.stderr)

    def attach(self, host: Host) -> None:
        for stream in (self.stdout, self.stderr):
            stream.attach(host.loop)

    def drain(self, host: Host) -> None:
        """The jobs are done: the loop turns on while anything waits for a reader, as a
        blocking write would wait, but a stop signal ends the wait (what is left is dropped):
        nothing else is due by then."""
        streams = (self.stdout, self.stderr)
        while host.stop_source is None and any(stream.waiting for stream in streams):
            host.loop.run_once()
        for stream in streams:
            if stream.waiting:  # stopped while its reader was behind: the batch's end is not its to wait for either
                stream.gone = True

    def close(self) -> None:
        """The loop is closing: what still waits is dropped, and later writes wait for their
        reader (``Stream.detach``)."""
        self.stdout.detach()
        self.stderr.detach()
