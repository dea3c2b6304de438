"""What the scheduler carries: a group of runs under one policy (``RunGroup``) and the record of
one run in flight (``Carried``). Apart from ``scheduler`` because they are the carried things'
own state, the carrier's side of it (which group a run is in, its loop view, wait and timers):
the scheduler's module is how they are driven, turn by turn."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Generator

    from ..loop import Timer
    from .runloop import RunLoop
    from .state import RunState
    from .waits import Wait

    Steps = Generator["Wait", None, object]


class RunGroup:
    """Runs carried under one policy, as a trio nursery's children are: a batch, one API
    caller's calls, a bench session. ``next_run()`` gives the group's next run (a generator of
    waits, or None: none now) whenever it has room (``capacity``), ``finished`` gets each one's
    result as it ends. A run whose step raises an ``Exception`` ends as itself: ``failed(exc,
    steps)`` (``steps``, the run's generator, says which) is the result ``finished`` gets for
    it, in the carrier's own shape (the service's reply), and the group's other runs go on
    (a batch's ``--halt-on-failure`` is its own rule, in its ``finished``). ``stop`` ends this group's runs only;
    only the host's own failure (a ``KeyboardInterrupt`` in a step, a carrier's ``finished``
    that raised) and the host's stop signals end every group."""

    def __init__(
        self,
        next_run: Callable[[], Steps | None],
        finished: Callable[[object], None],
        capacity: int = 1,
        *,
        failed: Callable[[Exception, Steps], object] | None = None,
    ) -> None:
        self.next_run = next_run
        self.finished = finished
        self.capacity = capacity
        self.failed = failed
        self.carried: set[Carried] = set()  # its runs in flight, as the host carries them
        self.runs: set[RunState] = set()  # ... and those of them that made their RunState (``Host.enlist``)
        self.stop_source: str | None = None  # the source of the group's own stop, once one came
        self.wake: Callable[[Carried], None] | None = None  # its host's, while it carries the group

    def stop(self, source: str) -> None:
        """End this group's live runs as a stop signal would; a run that begins after it is
        stopped before its child starts. The host's other groups go on."""
        if self.stop_source is None:
            self.stop_source = source
        for run in self.runs:
            run.stop_signal(source)
        if self.wake is not None:
            for carried in self.carried:
                self.wake(carried)


class Carried:
    """A run in flight: its generator and group, its loop view, what it waits for, the timers
    that wake it at its deadline and its next poll."""

    __slots__ = ("steps", "group", "run", "stopped", "loop", "wait", "deadline_timer", "poll_timer", "fault", "faulted")

    def __init__(self, steps: Steps, group: RunGroup) -> None:
        self.steps = steps
        self.group = group
        self.run: RunState | None = None  # once its steps made it (``Host.enlist``)
        self.stopped: str | None = None  # a passing stop that came before its run was made (``Scheduler.stop``)
        self.loop: RunLoop | None = None
        self.wait: Wait | None = None
        self.deadline_timer: Timer | None = None
        self.poll_timer: Timer | None = None
        self.fault: Exception | None = None  # a callback of its own raised it: thrown in at its next resume
        self.faulted = False  # ... once, the run's first (``Scheduler._faulted``)

    def cancel_timers(self) -> None:
        for timer in (self.deadline_timer, self.poll_timer):
            if timer is not None:
                timer.cancel()
        self.deadline_timer = self.poll_timer = None
