"""``RunHandle.communicate``'s exchange over ``start``'s pipes, as ``Popen.communicate`` makes it:
one selector in the calling thread writes the input into the child's stdin pipe while it reads
its stdout and stderr pipes to their end, so neither side can fill a pipe and wait on the other.

The pipes' ends reach their end of file once the run is over: the runner service holds its copy
of each descriptor it handed the child until the run has ended (its tree included), so a reader
never waits past the run. A run that ended with no child started is not waited on for them
(``Exchange.unstarted``): the service may hold a request's descriptors it could not act on. A
timeout keeps what was exchanged, and the next call goes on from it. Under ``start(...,
check=True)`` the RunError of a run that failed carries what the pipes gave, as
``subprocess.run``'s CalledProcessError does: nothing read is lost.
"""

from __future__ import annotations

import dataclasses
import os
import select
import selectors
import subprocess
import time

from .finished import argv
from .result import RunError

PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a write of at most this never blocks once select says so
READ_SIZE = 1 << 15


def exchanged(handle, input, timeout: float | None) -> tuple:
    """``RunHandle.communicate``: the exchange over ``handle``'s pipes (made at the first call,
    kept across a timeout), then the run waited for; ``(stdout, stderr)`` as Popen's."""
    deadline = None if timeout is None else time.monotonic() + timeout
    stdio = handle._call.stdio if handle._call is not None else None
    if handle._exchange is None:
        if input is not None and handle.stdin is None:
            raise ValueError("communicate(input=...) needs a run started with stdin=PIPE")
        data = input.encode(stdio._encoding(), stdio.errors or "strict") if isinstance(input, str) and stdio else input
        handle._exchange = Exchange(handle.stdin, {"stdout": handle.stdout, "stderr": handle.stderr}, data)
        if handle.pid is None and handle.poll() is not None:
            handle._exchange.unstarted()
    elif input is not None:
        raise ValueError("Cannot send input after starting communication")
    exchange = handle._exchange
    if not exchange.run(deadline):
        out, err = exchange.gathered("stdout"), exchange.gathered("stderr")
        raise subprocess.TimeoutExpired(argv(handle._call), timeout, out, err)  # type: ignore[arg-type]
    failed = None
    try:
        handle.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except RunError as error:
        failed = error
    stdout, stderr = _output(exchange, stdio)  # decoded before the check, as subprocess.run's
    if failed is not None:  # check=True: the error holds what the pipes gave, never None for it
        raise RunError(dataclasses.replace(failed.result, stdout=stdout, stderr=stderr))
    return stdout, stderr


def _output(exchange: Exchange, stdio) -> tuple:
    """What the stdout and stderr pipes gave, as text in text mode (None for a stream no pipe)."""
    return tuple(
        data if data is None or stdio is None or not stdio.text else stdio.decoded(data)
        for data in (exchange.gathered("stdout"), exchange.gathered("stderr"))
    )


class Exchange:
    """One handle's communication, kept across calls that time out: what is left of the input,
    and what each output pipe gave so far."""

    def __init__(self, stdin, outputs: dict, data: bytes | None):
        self.stdin = stdin
        self.outputs = {name: file for name, file in outputs.items() if file is not None}
        self.chunks: dict[str, list[bytes]] = {name: [] for name in self.outputs}
        self.input = memoryview(data or b"")
        self.offset = 0
        if stdin is not None:
            try:
                stdin.flush()
            except BrokenPipeError:
                pass
            if not data:
                _close(stdin)
                self.stdin = None

    def unstarted(self) -> None:
        """The run ended with no child started (``start`` returns once one has, or the run
        ended): what the runner wrote into the pipes is there already, read as far as it goes
        without waiting, and no input is written. Their end of file is never waited for: the
        runner service may still hold its copies of a request it could not act on (one cut
        short: closed when the next frame of the connection comes)."""
        if self.stdin is not None:
            _close(self.stdin)
            self.stdin = None
        for name, file in self.outputs.items():
            os.set_blocking(file.fileno(), False)
            try:
                while data := os.read(file.fileno(), READ_SIZE):
                    self.chunks[name].append(data)
            except BlockingIOError:
                pass
            file.close()

    def run(self, deadline: float | None) -> bool:
        """Exchange until every output pipe is at its end (True) or ``deadline`` passes (False)."""
        with selectors.PollSelector() as selector:
            if self.stdin is not None and not self.stdin.closed:
                selector.register(self.stdin, selectors.EVENT_WRITE)
            for file in self.outputs.values():
                if not file.closed:
                    selector.register(file, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                for key, _ in selector.select(left):
                    if key.fileobj is self.stdin:
                        self._write(selector, key)
                    else:
                        self._read(selector, key)
        return True

    def _write(self, selector: selectors.BaseSelector, key) -> None:
        chunk = self.input[self.offset : self.offset + PIPE_BUF]
        try:
            self.offset += os.write(key.fd, chunk)
        except BrokenPipeError:  # the child closed its stdin: the rest of the input is not wanted
            self.offset = len(self.input)
        if self.offset >= len(self.input):
            selector.unregister(key.fileobj)
            _close(key.fileobj)

    def _read(self, selector: selectors.BaseSelector, key) -> None:
        data = os.read(key.fd, READ_SIZE)
        if data:
            name = next(name for name, file in self.outputs.items() if file is key.fileobj)
            self.chunks[name].append(data)
            return
        selector.unregister(key.fileobj)
        key.fileobj.close()

    def gathered(self, name: str) -> bytes | None:
        """Every byte ``name``'s pipe gave so far; None for a stream that is no pipe."""
        return b"".join(self.chunks[name]) if name in self.chunks else None


def _close(file) -> None:
    try:
        file.close()
    except BrokenPipeError:  # the buffered rest could not be flushed: the child is gone
        pass
