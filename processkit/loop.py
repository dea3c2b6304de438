"""A small single-threaded event loop over epoll (``readiness``): fd callbacks, timers, one clock.

Shared by the engine, where everything that waits in a run (child pipes, the child's pidfd,
the signal wakeup socket, the control socket, deadlines) is a callback here, and by the CLI's
bounded waits (the stdin first-byte probe, the detach handshake, ``events --follow``,
``doctor``'s phases), which use it as a plain poller with a deadline.

Facts about readiness that every user must respect:

- Readiness is a hint, not a promise. ``select`` reports an fd as of the moment it returned;
  by the time a handler runs, an earlier handler in the same turn may have drained it, closed
  it, or closed it and opened a new file that got the same number. A handler for that number
  then runs on a stale event. So every handler tolerates a spurious wakeup: non-blocking fds
  only, and EAGAIN (or a read of nothing) means "not now", never an error or an ending.
- A handler removed during a turn is not called later in that turn (its slot is looked up
  again before each call), but one that was re-added for the same fd number is.
- Callbacks only record facts and move bytes; the caller decides what those facts mean after
  each turn (see ``run_once``). That is what lets the runner rank simultaneous endings instead
  of letting them race, and what keeps a callback from re-entering the loop.
- Time is the loop's clock (the monotonic clock unless the caller gives another, as tests do
  to drive deadlines, idle checks and pacing deterministically), read once per turn into
  ``now``: a callback that schedules a timer (``call_later``) measures from that ``now``, so
  every callback of one turn sees the same time. Timers are due when their time is at or before
  it, and a cancelled timer never runs. The one exception: a callback that stays in C serving its
  own fd (``stay_bound``, the native pump's stay) reads the clock before and after it, so the
  callbacks after it in that turn, and the turn's due timers, see the time it ended.
- A turn's callbacks run one after another, so what one moves delays every other fd ready in
  that turn: a callback that moves bytes takes its ``share`` of a budget, split among the fds
  ready in the turn. Alone it takes the whole budget (a lone writer's throughput); among many (the
  API's runner service carrying sixteen calls that flood their pipes, 4 MiB each a turn) a small
  call's few steps each waited for every flood's 4 MiB: 0.5-1 s a call (median), where subprocess.run took 6 ms.

A fact about start-up: the timer heap's functions come from ``_heapq``, the C module that
``heapq`` itself re-exports them from (``heapq`` adds only pure-Python helpers this loop never
uses, at a cost to every run's start-up); ``heapq`` is the fallback where it is missing. They
are imported with the first timer a process schedules (``call_at``): a run with no deadline, no
idle check and no pacing schedules none (an extension module's import: ~0.3 M instructions of a
run's start; bench/README.md, "Start-up (issue 49, start52)").
"""

from __future__ import annotations

import time

from . import readiness
from .plain import counter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from heapq import heapify, heappop, heappush
    from typing import Callable

    Callback = Callable[[], None]
else:
    heapify = heappop = heappush = None  # until the first timer: ``_load_heap``

SHARE_FLOOR = 256 * 1024  # the least a callback's ``share`` is: a turn among many ready fds still moves bytes


def _load_heap() -> None:
    """The heap's functions, imported once a timer needs them (every heap operation comes after
    a push)."""
    global heapify, heappop, heappush
    try:
        from _heapq import heapify, heappop, heappush
    except ImportError:  # an interpreter without CPython's _heapq
        from heapq import heapify, heappop, heappush


# select() overflows on a timeout centuries long (any u64 ms is a valid --timeout): a timer that
# far away is waited for in steps of this size instead.
LONGEST_WAIT = 86400.0
# The heap is rebuilt without its cancelled timers once they are more than half of it and it holds
# at least this many (asyncio's rule): a batch cancels each job's overall timeout as the job ends,
# so without it the heap would grow with jobs per second times the timeout.
COMPACT_AT = 100


class Timer:
    """A scheduled callback; ``cancel()`` makes it a no-op (it is dropped lazily from the heap,
    or all at once when the cancelled ones are most of it: ``COMPACT_AT``).

    A cancelled timer lets go of its callback at once: until it leaves the heap it still sits
    there, and a callback bound to, say, a finished control connection would keep that alive.
    """

    __slots__ = ("when", "callback", "cancelled", "_loop")

    def __init__(self, when: float, callback: Callback, loop: Loop | None = None):
        self.when = when
        self.callback: Callback | None = callback
        self.cancelled = False
        self._loop = loop  # while the timer is in that loop's heap

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        self.callback = None
        loop, self._loop = self._loop, None
        if loop is not None:
            loop._timer_cancelled()


class Loop:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._time = clock
        self._selector = readiness.Selector()
        self._handlers: dict[int, list[Callback | None]] = {}  # fd -> [reader, writer]
        self._timers: list[tuple[float, int, Timer]] = []
        self._cancelled = 0  # cancelled timers still in the heap
        self._sequence = counter()
        self.now = clock()
        self.ready = 1  # the fds ready in this turn (``share``)

    # -- time -------------------------------------------------------------------------------
    def clock(self) -> float:
        """Refresh and return the loop's notion of now (the clock's seconds)."""
        self.now = self._time()
        return self.now

    def call_at(self, when: float, callback: Callback) -> Timer:
        timer = Timer(when, callback, self)
        if heappush is None:
            _load_heap()
        heappush(self._timers, (when, next(self._sequence), timer))
        return timer

    @property
    def timers_held(self) -> int:
        """How many timers the heap holds, cancelled ones included (what a test watches)."""
        return len(self._timers)

    def _timer_cancelled(self) -> None:
        """A timer in the heap was cancelled: rebuild the heap without the cancelled ones once
        they are more than half of a heap of at least ``COMPACT_AT``."""
        self._cancelled += 1
        timers = self._timers
        if len(timers) >= COMPACT_AT and self._cancelled * 2 > len(timers):
            timers[:] = [entry for entry in timers if not entry[2].cancelled]
            heapify(timers)
            self._cancelled = 0

    def call_later(self, delay: float, callback: Callback) -> Timer:
        """``delay`` seconds after this turn's ``now`` (not refreshed: see the module's facts)."""
        return self.call_at(self.now + delay, callback)

    def stay_bound(self, longest: float) -> tuple[int, float] | None:
        """For a callback that keeps serving its own fd in C while nothing else in the loop is
        ready (the native pump's stay, csrc/stay.c): the epoll set's fd, and the monotonic time
        it must be back by (the next timer, at most ``longest`` s away). None where the loop runs
        on another clock than the monotonic one (a test's), whose timers C cannot see. Reads the
        clock (``now`` moves on: see the facts above)."""
        if self._time is not time.monotonic:
            return None
        delay = self._next_timer_delay()
        return self._selector.fileno(), self.now + (longest if delay is None else min(delay, longest))

    def share(self, budget: int) -> int:
        """A callback's share of ``budget`` bytes in this turn: split among the fds ready in it, at
        least ``SHARE_FLOOR`` (see the facts above)."""
        return max(SHARE_FLOOR, budget // self.ready) if self.ready > 1 else budget

    def waking(self, callback: Callable[..., None]) -> Callable[..., None]:
        """``callback`` as called from outside the loop's own turn; a host's per-run view
        (``engine.runloop.RunLoop``) makes it wake its run, the plain loop has none to wake."""
        return callback

    # -- file descriptors ---------------------------------------------------------------------
    def add_reader(self, fd: int, callback: Callback) -> None:
        if fd not in self._handlers:  # a new fd, read only (a run's pipes and pidfd): registered at once
            self._selector.register(fd, readiness.EVENT_READ)  # first: an fd it refuses is never one of ours
            self._handlers[fd] = [callback, None]
            return
        self._set_handler(fd, 0, callback)

    def remove_reader(self, fd: int) -> None:
        handlers = self._handlers.get(fd)
        if handlers is not None and handlers[1] is None:  # read only: it goes (``_set_handler``'s way)
            handlers[0] = None
            self._selector.unregister(fd)
            del self._handlers[fd]
            return
        self._set_handler(fd, 0, None)

    def add_writer(self, fd: int, callback: Callback) -> None:
        self._set_handler(fd, 1, callback)

    def remove_writer(self, fd: int) -> None:
        self._set_handler(fd, 1, None)

    def _set_handler(self, fd: int, slot: int, callback: Callback | None) -> None:
        handlers = self._handlers.get(fd)
        if handlers is None:
            if callback is None:
                return
            handlers = [None, None]
            handlers[slot] = callback
            self._selector.register(fd, self._mask(handlers))  # first, as ``add_reader``'s
            self._handlers[fd] = handlers
            return
        handlers[slot] = callback
        mask = self._mask(handlers)
        if mask:
            self._selector.modify(fd, mask)
        else:
            self._selector.unregister(fd)
            del self._handlers[fd]

    @staticmethod
    def _mask(handlers: list[Callback | None]) -> int:
        return (readiness.EVENT_READ if handlers[0] else 0) | (readiness.EVENT_WRITE if handlers[1] else 0)

    # -- running ------------------------------------------------------------------------------
    def run_once(self, max_wait: float | None = None) -> None:
        """Wait for the next fd event or due timer (at most ``max_wait`` s) and run callbacks."""
        timeout = self._next_timer_delay()
        if max_wait is not None:
            timeout = max_wait if timeout is None else min(timeout, max_wait)
        if timeout is not None:
            timeout = min(timeout, LONGEST_WAIT)
        ready = self._selector.select(timeout)
        self.clock()
        self.ready = len(ready)
        for key, events in ready:
            handlers = self._handlers.get(key.fd)
            if handlers is None:
                continue
            if events & readiness.EVENT_READ and handlers[0]:
                handlers[0]()
            if events & readiness.EVENT_WRITE and handlers[1] and key.fd in self._handlers:
                handlers[1]()
        self._run_due_timers()

    def _next_timer_delay(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heappop(self._timers)
            self._cancelled -= 1
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - self.clock())

    def _run_due_timers(self) -> None:
        while self._timers and self._timers[0][0] <= self.now:
            _, _, timer = heappop(self._timers)
            callback = timer.callback
            if callback is not None:  # None once cancelled
                timer._loop = None  # out of the heap: a cancel from here on counts nothing
                callback()
            else:
                self._cancelled -= 1

    def run_until(self, done: Callable[[], bool], deadline: float | None = None, poll: float | None = None) -> bool:
        """Turn the loop until ``done()`` or the monotonic ``deadline``; returns ``done()``.

        ``poll`` bounds each wait, for conditions no fd or timer announces (a process gone).
        """
        while not done():
            wait = poll
            if deadline is not None:
                remaining = deadline - self.clock()
                if remaining <= 0:
                    return done()
                wait = remaining if wait is None else min(wait, remaining)
            self.run_once(wait)
        return True

    def close(self) -> None:
        self._selector.close()
        self._handlers.clear()
        for _, _, timer in self._timers:
            timer._loop = None
        self._timers.clear()
        self._cancelled = 0
