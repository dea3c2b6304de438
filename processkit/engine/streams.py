"""A child's output pipes (or, with ``--pty``, the terminal's master) read on the runner's loop.

Each stream pumps what the child writes into its capture file and live echo. When the echo's
consumer falls behind, reading pauses until it catches up (backpressure); after a short read
it waits a moment so a child writing line by line fills its pipe instead of costing a loop turn
per line.
"""

from __future__ import annotations

import fcntl
import os
from typing import Protocol

from ..loop import Loop, Timer
from . import capture, pump
from .echo import EchoSink

PIPE_SIZE = 1024 * 1024
SHORT_READ = 64 * 1024  # a read smaller than this means the child writes in small pieces
SETTLE_SECONDS = 0.002  # ... so let its pipe fill for a moment before the next read
PTY_GATHER = 16  # a pty's reads yield 4 KiB: take up to 16 of them, while they last, as one chunk


class StreamOwner(Protocol):
    """What a stream needs of its run: the loop it reads on, the pump backend, and where to say
    that output arrived (idle and overflow checks)."""

    loop: Loop
    pump_backend: str

    def saw_output(self, stream: OutputStream) -> None: ...


class OutputStream:
    """One child output pipe (or, with ``--pty``, the terminal's master) with its pump, echo
    sink and read state."""

    def __init__(
        self, run: StreamOwner, name: str, fd: int, target: capture.CaptureTarget | None, echo_fd: int | None, pty: bool = False
    ):
        self.name = name
        self.fd = fd
        self._run = run
        self._loop = run.loop
        self.open = True
        self.paused = False  # the echo consumer is behind: reading waits for it (backpressure)
        self._settling: Timer | None = None  # the timer that ends a pause after a short read
        self._settles = not pty  # a pty's reads are always short: waiting would only slow it
        os.set_blocking(fd, False)
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass  # a smaller pipe only means more wakeups
        self.echo = EchoSink(self._loop, echo_fd, self._resume) if echo_fd is not None else None
        self.pump = pump.make_pump(run.pump_backend, fd, target, self.echo, PTY_GATHER if pty else 1)
        self._loop.add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            count = self.pump.pump()
        except OSError:
            count = 0  # an unreadable pipe ends like EOF, and so does a pty's hang-up (EIO)
        if count > 0:
            self._run.saw_output(self)
            if self.echo is not None and self.echo.full:
                self.paused = True
                self._loop.remove_reader(self.fd)
            elif count < SHORT_READ and self._settles:
                self._settle()
        elif count == 0:
            self.close()

    def _settle(self) -> None:
        """After a short read, wait SETTLE_SECONDS before reading again.

        A child writing line by line would otherwise cost a loop turn per line; letting the pipe
        fill turns thousands of tiny reads into a few full ones, for at most 2 ms of echo delay.
        """
        self._loop.remove_reader(self.fd)
        self._settling = self._loop.call_later(SETTLE_SECONDS, self._settled)

    def _settled(self) -> None:
        self._settling = None
        if self.open and not self.paused:
            self._loop.add_reader(self.fd, self._on_readable)

    def _resume(self) -> None:
        if self.paused and self.open:
            self.paused = False
            if self._settling is None:
                self._loop.add_reader(self.fd, self._on_readable)

    def close(self) -> None:
        if self.open:
            self.open = False
            if self._settling is not None:
                self._settling.cancel()
                self._settling = None
            self._loop.remove_reader(self.fd)
            os.close(self.fd)
