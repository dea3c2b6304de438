"""A child's output pipes (or, with ``--pty``, the terminal's master) read on the runner's loop.

Each stream pumps what the child writes into its capture file and live echo. When the echo's
consumer falls behind, reading pauses until it catches up (backpressure); how long it waits
between reads is the pacing the facts about pipes below explain.
"""

from __future__ import annotations

import os
import select

from ..loop import Loop, Timer
from ..native import set_pipe_size
from . import pump
from .echo import EchoSink

PIPE_SIZE = 1024 * 1024
DEFAULT_PIPE_SIZE = 64 * 1024  # Linux's, assumed when the size cannot be set

# Facts about pipes that shape how a child's output is read:
# - A reader woken on readiness gets whatever is queued; a child writing line by line wakes the
#   runner once per line, so a loop turn (and a Python call) per ~100 bytes.
# - The kernel cannot wake a pipe reader at a fill level (no SO_RCVLOWAT for pipes): the only
#   way to read bigger pieces from a slow writer is to stay away for a while and let it queue.
# - While the reader stays away, a writer that fills the pipe blocks: a wait long enough to fill
#   the pipe caps the writer's throughput at one pipe per wait, whatever the reader could take.
# - A timer wait can last longer than asked (a busy machine), so what a wait brought says how
#   fast the writer is only when divided by how long the wait really lasted.
# - While a pipe is in an epoll set, each of the writer's writes runs epoll's callback (the
#   writer's CPU, about a seventh more for 100-byte writes): the pipe is in the loop's set only
#   while the stream waits on readiness (or a native stay without a pause waits), never during a
#   coalescing wait or a stay's pause. Worse, a pipe once polled at all wakes its wait queue on
#   every write for good (``poll_usage`` in the kernel's fs/pipe.c: about a fifth more of a 100 B
#   writer's CPU): so a run carried alone (``unpolled_pipes``) has a captured pipe waited for by
#   the native pump's hashing thread in a blocking read, never polled (``NativePump.watch``).
# - A terminal (``--pty``) is no pipe: its line discipline hands out at most 4 KiB a read however
#   much is waiting, so every read looks short. Its stream drains to empty and never waits.
# So: after a short drain the stream stops reading for COALESCE_SECONDS (a lone line is still
# echoed at once; only the lines behind it wait). A drain right after such a wait that finds the
# pipe nearly full (the writer may have blocked), or that shows a writer able to half fill it in
# COALESCE_SECONDS, makes the stream read on every wakeup ("fast"). It waits again once a window
# of at least COALESCE_SECONDS shows half that rate: waiting then cannot fill the pipe.
SHORT_DRAIN = 64 * 1024  # a drain smaller than this means the child writes in small pieces
COALESCE_SECONDS = 0.002
DRAIN_BUDGET = 4 * 1024 * 1024  # per wakeup: a writer faster than the runner must not starve the loop
# The longest a native stay (csrc/stay.c) keeps the loop's turn before handing it back, whatever
# else waits: the loop's polled conditions (``run_until``'s ``poll``) and a host's other runs'
# steps, which no fd announces, are seen at most this late while a writer floods a pipe.
STAY_SECONDS = 0.01
NEVER = 2**64 - 1


def _stop_at(limit: int | None) -> int:
    """The byte count at which a stay hands back at once: one past ``limit``, where the run's
    ``saw_output`` may end it (``--capture-overflow cancel``)."""
    return NEVER if limit is None else min(limit + 1, NEVER)


def _pump(run, fd: int, target, echo: EchoSink | None):
    """The run's pump of ``fd``: the native one (hashing on a thread as its spawn allows:
    ``pump.hash_on_a_thread``), or the Python one, whose module only such a run loads."""
    if run.pump_backend == "native":
        return pump.NativePump(fd, target, echo, spawn_backend=run.spawn_backend)
    from .pump_python import PythonPump

    return PythonPump(fd, target, echo)


TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotation: a run's state is one
    from typing import Protocol

    from . import capture

    class StreamOwner(Protocol):
        """What a stream needs of its run: the loop it reads on, the pump and spawn backends
        (the pump's hashing follows the spawn's), and where to say that output arrived (idle
        and overflow checks), and from how many bytes on that may end the run."""

        loop: Loop
        pump_backend: str
        spawn_backend: str
        unpolled_pipes: bool  # a captured pipe is waited for by the pump's thread (``NativePump.watch``)

        @property
        def output_limit(self) -> int | None: ...  # the bytes past which ``saw_output`` may end the run

        def saw_output(self, stream: OutputStream) -> None: ...


class OutputStream:
    """One child output pipe (or, with ``--pty``, the terminal's master) with its pump, echo
    sink and read pacing (see facts about pipes)."""

    def __init__(
        self,
        run: StreamOwner,
        name: str,
        fd: int,
        target: capture.CaptureTarget | None,
        echo_fd: int | None,
        pty: bool = False,
    ):
        self.name = name
        self.fd = fd
        self._run = run
        self._loop = run.loop
        self.open = True
        self.paused = False  # the echo consumer is behind: reading waits for it (backpressure)
        self._coalescing: Timer | None = None  # the timer that ends a wait after a short drain
        self._wait_started = 0.0
        self._fast = False  # the writer fills the pipe during a wait: read on every wakeup
        self._window_start = 0.0  # while fast: the current window ...
        self._window_bytes = 0  # ... and the bytes drained in it
        # a terminal's master, no pipe: it hands out 4 KiB a read (drained to empty, never waited
        # for), and a descendant holding it holds no ended run up (``race``)
        self.pty = pty
        os.set_blocking(fd, False)
        self._sized = pty  # a pipe grows to PIPE_SIZE with its first bytes (a terminal is no pipe)
        self._paced_for(DEFAULT_PIPE_SIZE)
        self.echo = EchoSink(self._loop, echo_fd, self._resume) if echo_fd is not None else None
        self.pump = _pump(run, fd, target, self.echo)
        # A fast writer is served by the native pump's stay (not a terminal's: it never waits).
        self._stays = not pty and hasattr(self.pump, "stay")
        self._stop_at = _stop_at(run.output_limit)
        self._captured = target is not None  # keeps the drain's whole bound (``emptied``)
        self._wake_fd = fd  # what the loop waits on for the pipe: itself, or a watch's eventfd
        self._watched = False
        self._hurried = False  # a watched stream hurried while its thread's read was pending
        if target is not None and not pty and run.unpolled_pipes and hasattr(self.pump, "watch"):
            event_fd = self.pump.watch()
            if event_fd is not None:
                self._wake_fd, self._watched = event_fd, True
        self._listen()

    def _listen(self) -> None:
        """Waits for the pipe to become readable: on the loop, or (watched) by the pump's thread,
        which the loop hears of through the watch's eventfd."""
        if self._watched:
            self.pump.arm()
        self._loop.add_reader(self._wake_fd, self._on_readable)

    def _unlisten(self) -> None:
        self._loop.remove_reader(self._wake_fd)

    def _paced_for(self, pipe_size: int) -> None:
        self._nearly_full = pipe_size * 3 // 4
        self._fast_rate = pipe_size / 2 / COALESCE_SECONDS  # bytes per second

    def _enlarge(self) -> None:
        """The pipe grown once the child first writes to it: one that writes nothing (most of a
        batch's short jobs) costs no resize."""
        self._sized = True
        try:
            self._paced_for(set_pipe_size(self.fd, PIPE_SIZE))
        except OSError:  # a smaller pipe only means more wakeups
            pass

    def _on_readable(self) -> None:
        self._drain(after_wait=False)
        if self._hurried:  # the thread's read a hurry waited for: what follows it is read now
            self._hurried = False
            self.hurry()

    def _coalesced(self) -> None:
        self._coalescing = None
        if self.open and not self.paused:
            self._drain(after_wait=True)

    def _drain(self, after_wait: bool) -> None:
        try:
            count = self.pump.drain(self._loop.share(DRAIN_BUDGET), until_empty=self.pty)
        except OSError:
            count = pump.EOF_REACHED  # an unreadable pipe ends like EOF, and so does a pty's hang-up (EIO)
        if self._settle(count, after_wait) and self._fast and self._stays:
            self._stay()

    def _stay(self) -> None:
        """A fast writer's next wakeups served in C (csrc/stay.c) until anything else in the loop
        is ready or its next timer is due: the loop's turn was about a third of a wakeup's cost
        (bench/README.md, "The native pump's stay"). The pipe leaves the loop's set for the
        stay: while in it, every one of the writer's writes runs epoll's callback (csrc/stay.c's
        facts about the wait); a watched pipe's eventfd leaves it likewise. The loop's ``now`` is read again after it, as the time has moved
        on (see loop.py's facts)."""
        bound = self._loop.stay_bound(STAY_SECONDS)
        if bound is None:
            return
        self._unlisten()
        try:
            stop_at = self._stop_at if self.pump.seen < self._stop_at else NEVER  # crossed once
            count = self.pump.stay(self._loop.share(DRAIN_BUDGET), bound[0], bound[1], stop_at, self._nearly_full)
        except OSError:
            count = pump.EOF_REACHED
        self._loop.clock()
        self._settle(count, after_wait=False, registered=False)

    def _settle(self, count: int, after_wait: bool, registered: bool | None = None) -> bool:
        """Acts on a drain's count; returns whether the stream reads on at the next wakeup.
        ``registered``: whether the pipe is in the loop's set now (unless said: not after a wait)."""
        if registered is None:
            registered = not after_wait and not self._watched  # a watch is over once drained
        if count == pump.EOF_REACHED:
            self.close()
            return False
        if count == pump.WOULD_BLOCK:
            if not registered:  # the writer fell silent: wait for it on readiness again
                self._listen()
            return False
        if not self._sized:
            self._enlarge()
        self._run.saw_output(self)
        if self.echo is not None and self.echo.full:
            self.paused = True
            self._unlisten()
        elif self._keeps_reading(count, after_wait):
            if not registered:
                self._listen()
            return self.open and not self.paused and not (self.echo is not None and self.echo.backlog)
        else:
            if registered:
                self._unlisten()
            self._coalescing = self._loop.call_later(COALESCE_SECONDS, self._coalesced)
            self._wait_started = self._loop.now
        return False

    def _keeps_reading(self, count: int, after_wait: bool) -> bool:
        """False when the stream should wait for its pipe to fill before the next read."""
        if self.pty:
            return True
        now = self._loop.now
        if after_wait and (count >= self._nearly_full or count >= self._fast_rate * (now - self._wait_started)):
            self._fast, self._window_start, self._window_bytes = True, now, 0
            return True
        if self._fast:
            self._window_bytes += count
            elapsed = now - self._window_start
            if elapsed >= COALESCE_SECONDS:
                self._fast = self._window_bytes >= self._fast_rate / 2 * elapsed
                self._window_start, self._window_bytes = now, 0
            return self._fast or count >= SHORT_DRAIN
        return count >= SHORT_DRAIN

    def hurry(self) -> None:
        """The root is gone (``race``), or the tree (the drain after the teardown): what its
        writers left is read now, not after the pacing wait, which only pays while a writer may
        still add to the pipe. A few drains at most (a pipe a descendant or an escapee still
        fills goes back to the pacing); the end of file that follows the last bytes closes the
        stream without another turn of the loop. A stream waiting on readiness reads once, as
        its wakeup would (most often the end of file the exit left: a run whose root leaves
        nothing holding the pipe waits no turn for it). A watched stream's thread may not have
        returned from its read yet: its wakeup, whenever it comes, reads on to the end of file
        in the same turn, so the bytes and the end the exit left are seen together."""
        if self.open and not self.paused and self._coalescing is None:
            if self._watched:  # the thread's read is pending: its wakeup reads on (``_on_readable``)
                self._hurried = True
                return
            self._drain(after_wait=False)  # a short read starts the pacing wait: read on below
        for _ in range(4):
            if not self.open or self.paused or self._coalescing is None:
                return
            self._coalescing.cancel()
            self._coalescing = None
            self._drain(after_wait=True)

    def emptied(self) -> bool:
        """Whether everything its pipe was given is taken: the pipe holds nothing (``FIONREAD``).
        A captured pipe is never said so, whichever pump reads it (a watch's thread may hold a
        read not yet handed over): its drain keeps its whole bound (docs/threat-model.md)."""
        from ..events.pipe_room import queued

        return not self._captured and queued(self.fd) == 0

    def let_go(self) -> bool:
        """Whether every writer has let the pipe go (``POLLHUP``): its end of file is certain, a
        read away (a drain's, or a watched stream's thread's and the wakeup it writes), whatever
        is still queued before it. Asked once the root is gone (``race``): a look marks the pipe
        for good as a poll does (facts about pipes), a cost only to a writer, where none is left
        or where the run ends without waiting for it."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return any(events & select.POLLHUP for _, events in poller.poll(0))

    def _resume(self) -> None:
        if self.paused and self.open:
            self.paused = False
            if self._coalescing is None:
                self._listen()

    def close(self) -> None:
        if self.open:
            self.open = False
            if self._coalescing is not None:
                self._coalescing.cancel()
                self._coalescing = None
            self._unlisten()
            self.pump.close()
            os.close(self.fd)
