"""Streams ``--stdin-file`` into the child's stdin as the pipe drains, then closes it at EOF.

Only one chunk is held at a time. A child that exits or closes its stdin early is not an error
of the runner: the feed simply stops (EPIPE).
"""

from __future__ import annotations

import os

from .loop import Loop

CHUNK_SIZE = 64 * 1024


class StdinFeed:
    def __init__(self, loop: Loop, source_fd: int, pipe_fd: int):
        self._loop = loop
        self._source = source_fd
        self._pipe = pipe_fd
        self._pending = memoryview(b"")
        os.set_blocking(pipe_fd, False)
        loop.add_writer(pipe_fd, self._on_writable)

    @property
    def finished(self) -> bool:
        return self._pipe < 0

    def _on_writable(self) -> None:
        try:
            if not self._pending:
                chunk = os.read(self._source, CHUNK_SIZE)
                if not chunk:
                    self.close()
                    return
                self._pending = memoryview(chunk)
            written = os.write(self._pipe, self._pending)
            self._pending = self._pending[written:]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EPIPE: the child is done with its input; also an unreadable source
            self.close()

    def close(self) -> None:
        if self._pipe >= 0:
            self._loop.remove_writer(self._pipe)
            os.close(self._pipe)
            self._pipe = -1
        if self._source >= 0:
            os.close(self._source)
            self._source = -1
