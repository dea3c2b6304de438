"""The pure-Python output pump, the native one's fallback (``engine/pump.py`` says what a pump
does and which is taken): apart so that a run on the native pump neither loads nor runs it."""

from __future__ import annotations

import os

from .pump import CHUNK_SIZE, WOULD_BLOCK

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations: capture is imported by runs that capture
    from .capture import CaptureFile, CaptureReport, CaptureTarget, RingState
    from .echo import EchoSink


class PythonPump:
    """Reads into one reusable buffer; capture and echo see zero-copy views of it."""

    def __init__(self, fd: int, capture: CaptureTarget | None, echo: EchoSink | None):
        self.fd = fd
        self._buffer = bytearray(CHUNK_SIZE)
        self._view = memoryview(self._buffer)
        self._capture: CaptureFile | None = None
        if capture:
            from .capture import CaptureFile

            self._capture = CaptureFile(capture)
        self._echo = echo
        self._read = 0

    @property
    def seen(self) -> int:
        """Every byte read so far, as the native pump counts it, with or without capture."""
        return self._capture.seen if self._capture else self._read

    def pump(self) -> int:
        try:
            count = os.readv(self.fd, (self._buffer,))
        except (BlockingIOError, InterruptedError):
            return WOULD_BLOCK
        if count:
            chunk = self._view[:count]
            if self._capture:
                self._capture.write(chunk)
            else:
                self._read += count
            if self._echo:
                self._echo.write(chunk)
        return count

    def drain(self, budget: int, until_empty: bool = False) -> int:
        """Bytes read, or EOF_REACHED / WOULD_BLOCK when the first read found nothing.

        A short read ends the drain (the pipe is empty for now), unless ``until_empty``: a
        terminal hands out at most 4 KiB a read however much is waiting.

        A read error after some bytes ends the drain quietly; the next call raises it.
        """
        total = 0
        echo = self._echo
        while total < budget:
            try:
                count = self.pump()
            except OSError:
                if total:
                    return total
                raise
            if count <= 0:
                return total or count
            total += count
            if (count < CHUNK_SIZE and not until_empty) or (echo is not None and echo.backlog):
                break
        return total

    def report(self) -> CaptureReport | None:
        return self._capture.report() if self._capture else None

    def close(self) -> None:
        """The stream is closed: nothing of its own to end (``NativePump.close``)."""

    def ring_state(self) -> RingState | None:
        """What a ring capture's finishing needs, None when there is no ring."""
        return self._capture.ring_state() if self._capture else None
