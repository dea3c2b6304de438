"""The output pump: one call per readiness event moves a chunk from a child pipe onward.

A chunk goes to the capture file (up to the cap, hashed incrementally) and to the echo sink.
Two implementations with identical semantics: the native one (C via cffi, ``processkit._pump``)
and the pure-Python one. ``PROCESSKIT_PUMP`` picks: ``python`` forces the fallback, ``native``
demands the C path, anything else (or unset) prefers native when it was built.
"""

from __future__ import annotations

import errno
import os

from .. import native
from .capture import CaptureFile, CaptureReport, CaptureTarget
from .echo import EchoSink

CHUNK_SIZE = 256 * 1024
EOF_REACHED = 0
WOULD_BLOCK = -1


def select_backend() -> str:
    """``native`` or ``python``; raises a setup Failure when native is demanded but absent."""
    return native.select_backend("PROCESSKIT_PUMP", "pump")


class PythonPump:
    """Reads into one reusable buffer; capture and echo see zero-copy views of it."""

    def __init__(self, fd: int, capture: CaptureTarget | None, echo: EchoSink | None, gather: int = 1):
        self.fd = fd
        self._gather = gather
        self._buffer = bytearray(CHUNK_SIZE)
        self._view = memoryview(self._buffer)
        self._capture = CaptureFile(capture) if capture else None
        self._echo = echo
        self._read = 0

    @property
    def seen(self) -> int:
        """Every byte read so far, as the native pump counts it, with or without capture."""
        return self._capture.seen if self._capture else self._read

    def pump(self) -> int:
        count = 0
        for _ in range(self._gather):  # as the native pump: an ending after data waits a call
            try:
                got = os.readv(self.fd, (self._view[count:],))
            except (BlockingIOError, InterruptedError):
                if count:
                    break
                return WOULD_BLOCK
            except OSError:
                if count:
                    break
                raise
            count += got
            if not got or count == CHUNK_SIZE:
                break
        if count:
            chunk = self._view[:count]
            if self._capture:
                self._capture.write(chunk)
            else:
                self._read += count
            if self._echo:
                self._echo.write(chunk)
        return count

    def report(self) -> CaptureReport | None:
        return self._capture.report() if self._capture else None


class NativePump:
    """The same contract through ``processkit._pump``: read, echo, capped write and digest in C."""

    def __init__(self, fd: int, capture: CaptureTarget | None, echo: EchoSink | None, gather: int = 1):
        module = native.module()
        self._ffi, self._lib = module.ffi, module.lib
        self.fd = fd
        self._capture = capture
        self._echo = echo
        cap = capture.cap if capture else 0
        stream = self._lib.pk_stream_new(fd, capture.fd if capture else -1, cap, CHUNK_SIZE)
        if stream == self._ffi.NULL:
            raise MemoryError("cannot allocate the native pump buffer")
        self._stream = self._ffi.gc(stream, self._lib.pk_stream_free)
        self._stream.gather = gather
        self._result = self._ffi.new("pk_pump_result *")
        self._buffer = self._ffi.buffer(self._stream.buf, CHUNK_SIZE)

    @property
    def seen(self) -> int:
        return self._stream.seen

    def pump(self) -> int:
        echo = self._echo
        direct = echo if echo is not None and echo.accepts_direct else None  # the C side writes to it
        result = self._result
        self._lib.pk_stream_pump(self._stream, direct.fd if direct else -1, int(direct is not None and direct.is_socket), result)
        count = result.nread
        if count < 0:
            if result.read_errno in (errno.EAGAIN, errno.EINTR):
                return WOULD_BLOCK
            raise OSError(result.read_errno, os.strerror(result.read_errno))
        if count and echo is not None:
            if result.echo_errno:
                echo.abandon()
            elif result.echoed < count:
                echo.queue(self._buffer[result.echoed : count])
        return count

    def report(self) -> CaptureReport | None:
        if self._capture is None:
            return None
        digest = self._ffi.new("unsigned char[32]")
        self._lib.pk_stream_digest(self._stream, digest)
        return CaptureReport(
            self._capture.path,
            self._stream.seen,
            self._stream.written,
            bytes(self._ffi.buffer(digest, 32)).hex(),
            bool(self._stream.write_error),
            self._capture.cap,
        )


def make_pump(backend: str, fd: int, capture: CaptureTarget | None, echo: EchoSink | None, gather: int = 1):
    """``gather``: reads per call into one chunk while data is there (for a pty, see pty.py)."""
    implementation = NativePump if backend == "native" else PythonPump
    return implementation(fd, capture, echo, gather)
