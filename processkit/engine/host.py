"""The process that carries runs: one loop, one reaper and one signal watch for every run on it,
and the carrier that drives the runs side by side.

A run is a generator of ``Wait`` values: each says what it waits for (a condition, a deadline,
how often to look again when no fd or timer announces it). The carrier turns the shared loop and,
after each turn, resumes every run whose wait is over, so one run's grace period or drain never
holds up another's. ``run`` is this carrier with one run; ``batch`` keeps several in flight.

Facts about signals in such a process: a signal is the process's, not a run's. A stop signal
(SIGINT, SIGTERM, SIGHUP) ends every live run, as the runner's own stop did; SIGCHLD goes to the
reaper, which routes each root's exit to its run; SIGWINCH to the terminal of a ``--pty`` run.
"""

from __future__ import annotations

from .. import signum
from ..loop import Loop
from .members import Reaper
from .signals import STOP_SIGNALS, SignalWatch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Generator

    from ..control.lodging import Lodging
    from .state import RunState

    Steps = Generator["Wait", None, object]


class Wait:
    """What a run waits for: ``done()``, or the loop's clock reaching ``deadline``; ``poll``
    bounds each look when nothing wakes the loop for it."""

    __slots__ = ("done", "deadline", "poll")

    def __init__(self, done: Callable[[], bool], deadline: float | None = None, poll: float | None = None):
        self.done = done
        self.deadline = deadline
        self.poll = poll


def wait_until(done: Callable[[], bool], deadline: float | None = None, poll: float | None = None):
    """``yield from`` this in a run: resumes once ``done()`` or at ``deadline``; returns ``done()``
    (asked once when it already holds: some are reads of the kernel's files)."""
    if done():
        return True
    yield Wait(done, deadline, poll)
    return done()


class Host:
    """``watch``: whether the runs may take the process's signals (``run``, the ``batch`` CLI);
    a host inside someone else's process (the API, a Dask worker's thread) leaves them alone,
    and its roots' exits reach the reaper through their pidfds."""

    def __init__(self, watch: bool = True) -> None:
        self._watch = watch
        self.loop = Loop()
        self.reaper = Reaper(self.loop)
        self.runs: set[RunState] = set()  # the live runs a stop signal ends
        self.stopped: str | None = None  # the source of the first stop signal, once one came
        self._signals: SignalWatch | None = None
        self.lodging: Lodging | None = None  # a batch's one directory, which its runs borrow slots in
        self.alone = False  # carries one run and no other (``run``): its setup may wait on a pipe

    def lodge(self, label: str) -> None:
        """Lodge the runs carried from here in one directory of the host's (``control.lodging``):
        their sockets, records and tombstones there, none in the registry or the temp dir. Best
        effort: without it each run makes its own, as ``run`` does."""
        from ..control.lodging import Lodging
        from ..diagnostics import warn

        try:
            self.lodging = Lodging(label)
        except OSError as exc:
            warn(f"no batch directory, so each job makes its own: {exc.strerror or exc}")

    def watch_signals(self, resize: Callable[[], None] | None = None) -> None:
        """From here a stop signal ends the runs through their release instead of killing the
        process and orphaning what they made. Once per process; ``resize`` follows SIGWINCH."""
        if self._signals is not None or not self._watch:
            return
        handlers: dict[int, Callable[[int], None]] = {
            number: lambda number: self.stop(STOP_SIGNALS[number]) for number in STOP_SIGNALS
        }
        handlers[signum.SIGCHLD] = lambda number: self.reaper.reap()
        if resize is not None:
            handlers[signum.SIGWINCH] = lambda number: resize()
        self._signals = SignalWatch(self.loop, handlers)

    def stop(self, source: str) -> None:
        """End every live run as a stop signal does (``source`` as ``cancelled`` reports it)."""
        if self.stopped is None:
            self.stopped = source
        for run in self.runs:
            run.stop_signal(source)

    def dispatch_signals(self) -> None:
        """Deliver the signals caught so far (the runner does, just before it spawns)."""
        if self._signals is not None:
            self._signals.dispatch()

    def carry(self, steps: Steps) -> object:
        """Drive one run to its end; its generator's return value."""
        pending = [steps]
        result: list[object] = []
        self.carry_all(lambda: pending.pop() if pending else None, result.append)
        return result[0]

    def carry_all(
        self, next_run: Callable[[], Steps | None], finished: Callable[[object], None], capacity: int = 1
    ) -> None:
        """Keep up to ``capacity`` runs in flight, asking ``next_run()`` for another (a run's
        generator, or None: none now) whenever there is room; ``finished`` gets each one's
        result as it ends, and may make more runs available. Returns once none is in flight and
        ``next_run()`` has none."""
        waiting: dict[Steps, Wait | None] = {}
        interrupted = False
        try:
            while True:
                while len(waiting) < capacity:
                    steps = next_run()
                    if steps is None:
                        break
                    waiting[steps] = None
                if not waiting:
                    break
                try:
                    self._turn(waiting, finished)
                except KeyboardInterrupt:  # a process without the watch (the API): stop as SIGINT would
                    interrupted = True
                    self.stop("ctrl_c")
        finally:
            for steps in waiting:  # only after a bug: each run's release still runs
                steps.close()
        if interrupted:
            raise KeyboardInterrupt

    def _turn(self, waiting: dict[Steps, Wait | None], finished: Callable[[object], None]) -> None:
        """Resume the runs whose wait is over; when none ended, turn the loop once.

        Before a fresh run's first step (its whole setup and spawn, the longest step a run takes)
        the loop is looked at once without waiting, so a root that exited meanwhile is reaped,
        and its run resumed, now: not stamped late, after the other run's setup."""
        if len(waiting) > 1 and any(wait is None for wait in waiting.values()):
            self.loop.run_once(0.0)
        now = self.loop.now
        ended = False
        for steps, wait in list(waiting.items()):
            if wait is None or wait.done() or (wait.deadline is not None and now >= wait.deadline):
                try:
                    waiting[steps] = steps.send(None)
                except StopIteration as stop:
                    del waiting[steps]
                    finished(stop.value)
                    ended = True
        if not ended:
            self.loop.run_once(self._longest_wait(waiting.values()))

    def _longest_wait(self, waits) -> float | None:
        """How long the loop may wait before some run has to look again."""
        bound = None
        now = self.loop.clock()
        for wait in waits:
            if wait is None:
                return 0.0
            for limit in (wait.poll, None if wait.deadline is None else max(0.0, wait.deadline - now)):
                if limit is not None and (bound is None or limit < bound):
                    bound = limit
        return bound

    def close(self) -> None:
        """Stop watching signals (their handlers stay, so late ones are absorbed) and the loop;
        give back the lodging, after every run it lodged."""
        if self.lodging is not None:
            self.lodging.close()
            self.lodging = None
        if self._signals is not None:
            self._signals.close()
        self.loop.close()
