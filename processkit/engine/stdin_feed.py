"""Streams ``--stdin-file`` into the child's stdin as the pipe drains, then closes it at EOF.

Only one chunk is held at a time, so a file of any size costs one chunk of memory. A child that
exits or closes its stdin early is not an error of the runner: the feed simply stops (EPIPE).

The source is usually a regular file, which never blocks for long and cannot be polled. A FIFO
or a shell's process substitution (``--stdin-file <(producer)``) can block, so every source is
read non-blocking on the runner's own file description, and while it has nothing to give the
feed waits for it instead of for the pipe. A regular file too: a kernel file that reads as one
may wait for data (tracefs's ``trace_pipe``); read blocking, it held the runner's loop (its
``--timeout``, its stop signals, under the API's service every call) until data came. A disk
file's read ignores ``O_NONBLOCK``.

Facts about FIFOs (Linux ``fs/pipe.c``) that shape how one is opened and first read:
- ``open(O_RDONLY)`` blocks until a writer opens the FIFO, and no timer can end that wait: a
  run whose writer never comes would hang before its ``--timeout`` is armed, and a batch would
  hang with it. With ``O_NONBLOCK`` the open returns at once.
- Opened that way, ``read`` returns 0 while no writer has the FIFO open, whether or not one ever
  had: read before a writer came, the feed would take it for the end of the input.
- ``poll`` reports the FIFO readable only once a writer has written, or has come and gone
  (POLLHUP counts writers seen since the open). So the feed waits for that before its first
  read, and from then on a read of 0 is the real end.

A device the kernel cannot watch (``epoll_ctl`` refuses it, EPERM: ``/dev/hwrng``, whose
non-blocking read says EAGAIN while it has nothing) is looked at again every ``UNWATCHED_RETRY``
seconds instead: the refusal raised out of the loop, an internal error (104) that ended the run,
and under the API's service the service itself with every run it carried.

A terminal (``--pty``) has no end to close: its input ends with the bytes ``end_of_input``
gives for the last byte fed (the terminal's EOF character), written after the file.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop, Timer

CHUNK_SIZE = 64 * 1024
UNWATCHED_RETRY = 0.01  # seconds between reads of a source the loop cannot watch (module docstring)


def open_source(path: str, *, own: bool = False) -> int:
    """Open the file for the feed; raises OSError when it cannot be read (a setup failure).
    ``own``: the carrier's own place for it (the service's memfd), opened plainly: only a path
    the caller named is walked (``userfiles.open_input``), at ~30 µs a call."""
    # Non-blocking from the open on, so a FIFO with no writer yet cannot hold up the runner.
    if own:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    else:
        from ..userfiles import open_input  # here: a run without --stdin-file loads no ``userfiles``

        fd = open_input(path, others_fifo=True)  # a FIFO that never delivers is ended by --timeout
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    return fd  # non-blocking, a regular file too (see the module's docstring)


class StdinFeed:
    def __init__(self, loop: Loop, source_fd: int, pipe_fd: int, end_of_input: Callable[[bytes], bytes] | None = None):
        self._loop = loop
        self._source = source_fd
        self._pipe = pipe_fd
        self._end_of_input = end_of_input
        self._last_byte = b""
        self._pending = memoryview(b"")
        self._retry: Timer | None = None  # the next look at a source the loop cannot watch
        self._watched = True  # until the loop cannot watch the source (module docstring)
        os.set_blocking(pipe_fd, False)
        if stat.S_ISFIFO(os.fstat(source_fd).st_mode):  # a writer may not have come yet
            loop.add_reader(source_fd, self._on_source_readable)
        else:
            loop.add_writer(pipe_fd, self._on_writable)

    def _on_writable(self) -> None:
        if not self._pending and not self._fill():
            return
        try:
            written = os.write(self._pipe, self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EPIPE: the child is done with its input
            self.close()
            return
        self._pending = self._pending[written:]

    def _fill(self) -> bool:
        """Read the next chunk; False when there is none yet (or the feed has ended)."""
        try:
            chunk = os.read(self._source, CHUNK_SIZE)
        except (BlockingIOError, InterruptedError):
            self._loop.remove_writer(self._pipe)
            if self._watched:
                try:
                    self._loop.add_reader(self._source, self._on_source_readable)
                    return False
                except PermissionError:  # no poll for it: looked at again shortly, never asked again
                    self._watched = False
            self._retry = self._loop.call_later(UNWATCHED_RETRY, self._on_source_readable)
            return False
        except OSError:  # a source that fails mid-way ends the child's input there
            chunk = b""
        if not chunk and self._end_of_input is not None:  # once: the next read ends the feed
            chunk, self._end_of_input = self._end_of_input(self._last_byte), None
        if not chunk:
            self.close()
            return False
        self._last_byte = chunk[-1:]
        self._pending = memoryview(chunk)
        return True

    def _on_source_readable(self) -> None:
        self._retry = None
        self._loop.remove_reader(self._source)
        if self._fill():
            self._loop.add_writer(self._pipe, self._on_writable)

    def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._pipe >= 0:
            self._loop.remove_writer(self._pipe)
            os.close(self._pipe)
            self._pipe = -1
        if self._source >= 0:
            self._loop.remove_reader(self._source)
            os.close(self._source)
            self._source = -1
