"""Reading a run's JSONL while the runner writes it, as typed events.

The stream is read as untrusted bytes through ``events.reader`` (complete lines only, bounded);
a line that is not a JSON object is skipped. Reading ends at ``runner_exit``, or once the
writer is known to be gone and what it left has been read. The file is opened once, so it can
be read to its end even after its name was removed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..events.reader import LineSplitter
from ..events.types import Event, RunnerExit, from_json

READ_CHUNK = 64 * 1024


class Follower:
    """Hands out the events appended to ``path`` since the last call.

    ``writer_gone()`` says whether nothing can write the stream any more; ``settle`` is how long
    to keep reading after that (a registered runner unregisters just before its last line)."""

    def __init__(self, path: str, writer_gone: Callable[[], bool], *, settle: float = 0.0):
        self.path = path
        self.done = False
        self._writer_gone = writer_gone
        self._settle = settle
        self._gone_at: float | None = None
        self._fd: int | None = None
        self._splitter = LineSplitter()

    def read(self) -> list[Event]:
        """The new complete events; sets ``done`` when no more can come."""
        if self.done:
            return []
        if self._gone_at is None and self._writer_gone():  # asked before reading: no line is missed
            self._gone_at = time.monotonic()
        gone_at = self._gone_at
        events = self._events(self._splitter.feed(self._drain()))
        if self.done:
            self.close()
        elif gone_at is not None and time.monotonic() - gone_at >= self._settle:
            events += self._events(self._splitter.end())
            self.done = True
            self.close()
        return events

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _drain(self) -> bytes:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            except FileNotFoundError:
                return b""
        chunks: list[bytes] = []
        while True:
            chunk = os.read(self._fd, READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def _events(self, lines) -> list[Event]:
        events = []
        for line in lines:
            if self.done:
                break
            record = line.event
            if record is not None:
                event = from_json(record)
                events.append(event)
                self.done = isinstance(event, RunnerExit)
        return events


def read_all(path: str) -> list[Event]:
    """Every event of a finished stream (none when it cannot be opened)."""
    follower = Follower(path, lambda: True)
    try:
        return follower.read()
    except OSError:
        follower.close()
        return []
