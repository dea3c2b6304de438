"""The output pump: one call per wakeup drains a child pipe onward.

``drain()`` reads chunk after chunk until a read comes back short (the pipe is empty for now),
at EOF, or a byte budget is spent (the native pump's splice, below, goes on past a short splice,
which a full echo also makes, and where a splice moves nothing a read says why: empty, ended, or
the echo full),
so the event loop runs once per wakeup rather than once per chunk; ``pump()`` is the single
chunk step it is made of. Each chunk goes to the capture file (up to the cap, hashed
incrementally) and to the echo sink. An echo that cannot take a whole chunk ends the drain:
from then on the sink's backlog paces reading (see echo.py).
Two implementations with identical semantics: the native one (C via cffi, ``processkit._native``)
and the pure-Python one (``engine/pump_python.py``, loaded only when taken). Once nothing more is
to be captured, the native one moves echo-only bytes by splice(2) without their reaching user
space (csrc/pump.c), into a pipe, FIFO or character device other than the runner's stderr's file (whose last byte the runner must see,
``EchoSink.tells_line_end``); files, counts, flags,
digests and the echoed bytes are the same either way. ``PROCESSKIT_PUMP`` picks: ``python`` forces the fallback, ``native``
demands the C path, anything else (or unset) prefers native when it was built.
"""

from __future__ import annotations

import errno
import os

from .. import diagnostics, envvars, native
from .echo import EchoSink

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotations: capture is imported by runs that capture
    from .capture import CaptureReport, CaptureTarget, RingState

CHUNK_SIZE = 256 * 1024
# A stay (NativePump.stay) that drained less than its pipe's "nearly full" sleeps before its next
# wait, so a writer of small pieces is read a pile at a time rather than a piece per wakeup, and
# its writes stop waking the runner each (csrc/stay.c). The pause adapts to the writer between
# these two; the longest bounds the echo's delay: what a user sees is line by line output
# arriving in batches a millisecond apart at most.
SHORTEST_GATHER_SECONDS = 0.0003
GATHER_SECONDS = 0.001
EOF_REACHED = 0
WOULD_BLOCK = -1


def select_backend() -> str:
    """``native`` or ``python``; raises a setup Failure when native is demanded but absent."""
    return native.select_backend("PROCESSKIT_PUMP", "pump")


def hash_on_a_thread(spawn_backend: str | None = None) -> bool:
    """Whether the native pump hashes captures on a thread of its own (csrc/hasher.c).

    Only with a second CPU to run it; ``PROCESSKIT_HASH_THREAD=0`` (or ``1``) overrides, so the
    two designs can be measured side by side. Never beside the Popen spawn path (whenever
    ``spawn.select_backend`` picks it), whatever the override: its ``preexec_fn`` runs Python in
    a forked child, which deadlocks when another thread held a lock (the allocator's) at the
    fork. The runner has no other thread, so hashing inline keeps that fork safe (engine/spawn.py).
    ``spawn_backend``: the run's own choice (``RunState.spawn_backend``, made once a run by
    launch.py), else made here as the run's spawn makes it.
    """
    if spawn_backend is None:
        from .spawn import select_backend

        spawn_backend = select_backend()
    if spawn_backend == "python":
        return False
    choice = envvars.get("PROCESSKIT_HASH_THREAD") or ""  # per run: os.environ.get costs ~2 µs unset
    if choice in ("0", "1"):
        return choice == "1"
    if not _CPUS:
        _CPUS.append(os.cpu_count() or 1)  # once per process: a read of /sys a pump otherwise
    return _CPUS[0] > 1


_CPUS: list[int] = []


class NativePump:
    """The same contract through ``processkit._native``: the whole drain of a wakeup in one C call."""

    def __init__(
        self,
        fd: int,
        capture: CaptureTarget | None,
        echo: EchoSink | None,
        hash_thread: bool | None = None,
        spawn_backend: str | None = None,
    ):
        module = native.module()
        self._ffi, self._lib = module.ffi, module.lib
        self.fd = fd
        self._capture = capture
        self._echo = echo
        lib = self._lib
        # How the C side writes the echo: fixed by what the echo is, so worked out once.
        self._echo_mode = (lib.PK_ECHO_SEND if echo and echo.is_socket else 0) | (
            lib.PK_ECHO_SPLICE if echo and echo.splices else 0
        )
        cap = capture.cap if capture else 0
        head = capture.head if capture else 0
        self._in_place = cap > head  # a ring: written in place, its digest left to capture_keep.py
        threaded = (
            capture is not None
            and cap > 0
            and not self._in_place
            and (hash_on_a_thread(spawn_backend) if hash_thread is None else hash_thread)
        )
        stream = self._lib.pk_stream_new(fd, capture.fd if capture else -1, cap, head, CHUNK_SIZE, int(threaded))
        if stream == self._ffi.NULL:
            raise MemoryError("cannot allocate the native pump buffer")
        self._marks = None
        if capture is not None and self._in_place:
            from . import capture_keep

            if not capture_keep.ring_ready(capture.fd):
                stream.write_error = errno.ESPIPE
            if capture.marks is not None:  # kept by the C side as it stores each chunk (csrc/pump.h)
                from ..capture_layout import WRITE_ERROR

                capture.marks[WRITE_ERROR] = int(bool(stream.write_error))
                self._marks = self._ffi.from_buffer("uint64_t[]", capture.marks)
                stream.marks = self._marks
        self._stream = self._ffi.gc(stream, self._lib.pk_stream_free)
        self._result = self._ffi.new("pk_drain_result *")
        self.stay_counts = self._ffi.new("pk_stay_counts *")  # what the stays did (tests, bench)
        self._ring = self._ffi.buffer(self._stream.buf, self._stream.ring_size)
        self._watch: int | None = None  # the eventfd a watched pipe is waited for on (``watch``)

    @property
    def seen(self) -> int:
        return self._stream.seen

    def watch(self) -> int | None:
        """The pipe waited for without ever being polled (csrc/hasher.c's facts: a pipe once
        polled costs its writer on every write for good): when the stream would wait on
        readiness it ``arm``s instead, and waits for the returned eventfd, which the hashing
        thread writes once its blocking read of the pipe returned; the next drain takes that
        read first. Only a capture that keeps its head, with a hashing thread, before its first
        bytes; None where it cannot (the stream is read as before)."""
        if self._watch is not None:
            return self._watch
        stream = self._stream
        if not stream.wants_thread or stream.seen:
            return None
        try:  # a descriptor of its own for the thread's blocking reads: this one stays non-blocking
            watch_fd = os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            event_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:  # no fd left: the pipe is polled as before, no extra reader of it kept
            os.close(watch_fd)
            return None
        if not self._lib.pk_stream_watch(stream, watch_fd, event_fd):
            os.close(watch_fd)
            os.close(event_fd)
            return None
        self._watch = event_fd
        return event_fd

    def arm(self) -> None:
        """Where the stream would wait on readiness: the thread's read waits instead (``watch``)."""
        self._lib.pk_stream_arm(self._stream)

    def close(self) -> None:
        """The stream is closed: a watch ends (its pending read cancelled, its thread joined;
        the digest is still to be had), its eventfd closed."""
        if self._watch is not None:
            self._lib.pk_stream_unwatch(self._stream)
            os.close(self._watch)
            self._watch = None

    def pump(self) -> int:
        return self.drain(1)

    def drain(self, budget: int, until_empty: bool = False) -> int:
        echo = self._echo
        if echo is not None and echo.broken:
            echo = None
        direct = echo if echo is not None and not echo.backlog and not echo.gated else None  # C writes it
        result = self._result
        # Behind a backlog every chunk is queued whole, so only one is read per call.
        self._lib.pk_stream_drain(
            self._stream,
            direct.fd if direct is not None else -1,
            self._echo_mode,
            budget if direct is not None or echo is None else 1,
            int(until_empty),
            result,
        )
        return self._settle(echo)

    def stay(self, budget: int, epoll_fd: int, until: float, stop_at: int, full_at: int) -> int:
        """``drain``, then on in C while this pipe becomes ready and nothing in the loop's epoll
        set ``epoll_fd`` does, until the monotonic ``until`` at the latest (csrc/stay.c). The
        pipe must not be in that set meanwhile (the caller takes it out: see stay.c's facts
        about the wait); the same
        results as ``drain``, ``count`` totalling the whole stay. ``full_at``: the pipe's
        nearly full, which a pause to gather pieces must not reach. A stream whose echo has a
        backlog or is written here alone (gated) only drains: those bytes are Python's."""
        echo = self._echo
        if echo is not None and echo.broken:
            echo = None
        if echo is not None and (echo.backlog or echo.gated):
            return self.drain(budget)
        self._lib.pk_stream_stay(
            self._stream,
            echo.fd if echo is not None else -1,
            self._echo_mode,
            budget,
            epoll_fd,
            int(until * 1e9),
            stop_at,
            full_at,
            int(SHORTEST_GATHER_SECONDS * 1e9),
            int(GATHER_SECONDS * 1e9),
            self._result,
            self.stay_counts,
        )
        return self._settle(echo)

    def _settle(self, echo: EchoSink | None) -> int:
        """A drain's result as ``drain`` returns it, queueing what the echo did not take, with
        the capture's rest stored: a write that a signal interrupted (EINTR: SIGTTOU at a
        terminal target with ``tostop``, which stops the runner in its handler), retried once the
        handler ran (each pass of this loop lets the interpreter run it), as ``os.write`` does."""
        result = self._result
        stream = self._stream
        while stream.rest_len:
            self._lib.pk_stream_store_rest(stream)
        if result.echo_last and echo is not None and echo.tells_line_end:
            diagnostics.echoed(result.echo_last - 1)
        last = result.last
        if last and echo is not None:
            if result.echo_errno:
                echo.abandon(result.echo_errno)
            elif result.echoed < last:  # a gated echo's bytes are written here, as the Python pump's
                rest = self._ring[result.last_at + result.echoed : result.last_at + last]
                (echo.write if echo.gated else echo.queue)(rest)
        if result.total:
            # Written or spliced: all but the last chunk's unechoed rest (a drain behind a backlog
            # reads one chunk, queued whole), spliced bytes included when that rest was queued;
            # taken now, as its stall clock reads it (the loop's turn's time: a stay's start).
            if echo is not None and not echo.broken and result.total - last + result.echoed:
                echo.took_at = echo.loop.now
            return result.total
        if result.eof:
            return EOF_REACHED
        if result.read_errno in (errno.EAGAIN, errno.EINTR):
            return WOULD_BLOCK
        raise OSError(result.read_errno, os.strerror(result.read_errno))

    def ring_state(self) -> RingState | None:
        """What a ring capture's finishing needs, None when there is no ring."""
        if self._capture is None or not self._in_place:
            return None
        stream = self._stream
        return self._capture, stream.seen, stream.written, stream.ring_from, bool(stream.write_error)

    def report(self) -> CaptureReport | None:
        if self._capture is None:
            return None
        import processkit.engine.capture as capture  # a report a stream: not ``from .`` (``containment._lender``)

        ring = self.ring_state()
        if ring is not None:
            return capture.ring_report(*ring)

        digest = self._ffi.new("unsigned char[32]")
        self._lib.pk_stream_digest(self._stream, digest)
        return capture.CaptureReport(
            self._capture.path,
            self._stream.seen,
            self._stream.written,
            bytes(self._ffi.buffer(digest, 32)).hex(),
            bool(self._stream.write_error),
            self._capture.cap,
        )
