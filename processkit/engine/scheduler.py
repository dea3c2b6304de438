"""The host's scheduler: the run queue that drives a host's runs side by side on its one loop,
in groups. Apart from ``host`` because it is the one part of a host that knows nothing of the
process: no signal, no reaping, no lodging, only runs, their wake-ups and their groups (the
host adds the process's share on top, as ``Host``).

A run is a generator of ``Wait`` values: each says what it waits for (a condition, a deadline,
how often to look again when nothing announces it). The scheduler keeps a run queue, as trio's
``runq``: a run is resumed only once something marked it runnable, and the loop never blocks
while the queue holds a run. ``run`` is a host with one run; ``batch`` keeps several in flight.

Facts about wake-ups, which the design leans on:
- A run's conditions change only through something that happens *to that run*: a callback it
  put on the loop (its pipes, control socket, echo, timers: each run gets a ``RunLoop``, a view
  of the shared loop that marks the run runnable after any of its callbacks), its root's exit
  (routed by the reaper from whichever run's step collected it, through ``RunLoop.waking``), a
  stop signal (``stop`` marks every run), or the kernel's state (a tree that empties: what no fd
  announces, so such a ``Wait`` names a ``poll``). So each turn looks only at the runs that woke:
  O(those), not O(runs). A ``done()`` may still be false when its run is woken (a pipe read that
  was not the EOF), so it is asked again then, at each poll and at the deadline, never per turn.
- A step that wakes another run (a fresh run's spawn reaping an older run's root) puts it on the
  queue, so the loop turns without waiting and that run is resumed in the same pass of work,
  not at some unrelated timer. A run that yields a ``Wait`` whose ``done()`` already holds is
  queued too: resumed on the next turn, the loop only looked at, so a run can give up the loop
  between bounded chunks of work.
- Before a fresh run's first step (its whole setup and spawn, the longest step a run takes) the
  loop is looked at once and every woken run resumed: a root that exited meanwhile is stamped
  now, not after the other run's setup. So at most one fresh run starts per turn.
- Runs are carried in groups (``RunGroup``, ``rungroup``, as trio's nurseries): a batch, one
  API caller's calls, a bench session, each with its own stop and failure policy. A step that raises hangs
  nothing (a ``done()`` that raises is thrown into its run, at the yield, as its step's own), and
  neither does a callback a run put on the loop: the first ``Exception`` one of them raises is
  thrown into its run likewise at its next resume (``RunLoop.waking``; the later ones of that run
  are dropped: it is ending as the runner's own failure already, ``runner.steps`` tearing its tree
  down), never out of the loop, where it ended every run of every group and the host with them.
  An ``Exception`` is its run's own failure: that run ends as itself (``runner.steps`` catches
  what it can, so its stream still ends with ``runner_exit``; a carrier's set-up that raised
  before is mapped by its group's ``failed`` to the result its caller gets) and every other run
  goes on, unless its group's policy halts the group. Only the host's own failure (a
  ``KeyboardInterrupt`` inside a step, handed here through ``interrupted``; a carrier's
  ``finished`` that raised) stops every run of every group as a stop signal would, carries each
  to its end, and then propagates from ``supervise``.
"""

from __future__ import annotations

from ..diagnostics import fault_dropped
from .rungroup import Carried, RunGroup
from .runloop import RunLoop

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop
    from .rungroup import Steps
    from .state import RunState
    from .waits import Wait


class Scheduler:
    """Runs carried on ``loop`` in groups, each resumed once something woke it; a stop (the
    host's stop signals, a failure of the host's own) ends every run of every group."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.runs: set[RunState] = set()  # the live runs a stop signal ends
        self.stop_source: str | None = None  # the source of the first stop signal, once one came
        self.stops = 0  # how many stops came: a batch's later one cuts its closing bookkeeping short
        # Whether a stop signal also stops every run begun after it (``run``, a batch, a bench
        # session: each ends once stopped). The runner service serves its caller's later calls
        # after one: there a stop ends the runs in flight alone (False).
        self.stops_last = True
        self._carried: set[Carried] = set()
        self._runq: dict[Carried, None] = {}  # woken runs, in the order they woke
        self._fresh: list[Carried] = []  # filled runs not yet resumed (``carry_all``)
        self._woken: list[Carried] = []  # this pass's woken runs not yet resumed, the next last
        self._current: Carried | None = None
        self._failure: BaseException | None = None  # raised inside a step: re-raised once all ended

    def stop(self, source: str) -> None:
        """End every live run as a stop signal does (``source`` as ``cancelled`` reports it);
        a run in flight whose steps have not made it yet is stopped as it makes it. Unless the
        host's stops pass (``stops_last`` False), every run begun later is stopped too."""
        if self.stops_last and self.stop_source is None:
            self.stop_source = source
        self.stops += 1
        for run in self.runs:
            run.stop_signal(source)
        for carried in self._carried:
            if carried.run is None and carried.stopped is None:
                carried.stopped = source
            self._runq[carried] = None

    def stop_carried(self, steps: object, source: str) -> None:
        """End the run ``steps`` drives as a stop signal would (a caller interrupted while it
        waited on that run: the API's service); the others go on, those with the same run id
        too (run ids need not be unique). A run whose steps have not begun is not touched: its
        carrier looks before its first step."""
        for carried in self._carried:
            if carried.steps is steps:
                if carried.run is not None:
                    carried.run.stop_signal(source)
                self._wake(carried)

    def fail_carried(self, steps: object, exc: Exception) -> None:
        """End the run ``steps`` drives as its own failure ``exc``, thrown in at its next resume
        as a callback's fault is (``runner.steps`` tears its tree down): a stop its carrier could
        not take (the API's service), which must end that run all the same."""
        for carried in self._carried:
            if carried.steps is steps:
                self._faulted(carried, exc)
                self._wake(carried)

    def interrupted(self, exc: BaseException) -> None:
        """A run's step raised ``exc`` (and ended its run as it could): stop the others, and
        raise ``exc`` from ``carry_all`` once every run has ended."""
        if self._failure is None:
            self._failure = exc
        self.stop("ctrl_c" if isinstance(exc, KeyboardInterrupt) else "internal")

    @property
    def failing(self) -> bool:
        """The host's own failure is stored (``interrupted``): no run starts, it is raised once all end."""
        return self._failure is not None

    def run_loop(self) -> RunLoop:
        """The loop view of the run being resumed now (asked from its steps)."""
        carried = self._current
        assert carried is not None, "asked from a run's step"
        if carried.loop is None:
            carried.loop = RunLoop(
                self.loop, lambda: self._wake(carried), self._others_waiting, lambda exc: self._faulted(carried, exc)
            )
        return carried.loop

    def _faulted(self, carried: Carried, exc: Exception) -> None:
        """A callback ``carried`` put on the loop raised ``exc`` (its loop view then wakes it):
        thrown into it at its next resume, the first only. One of a run already ended (a
        callback its release left behind) has no run to end: dropped, as the run's later ones
        (said once: ``diagnostics.fault_dropped``); so is one once its run's outcome is decided
        (delisted: its stream's drain, its carrier's work after, the service's held captures),
        which must not replace what the stream told (``runner_exit``): its carrier is only woken."""
        decided = carried.run is not None and carried.run not in self.runs
        if not carried.faulted and carried in self._carried and not decided:
            carried.faulted = True
            carried.fault = exc
        else:
            fault_dropped(exc)

    def _others_waiting(self) -> bool:
        """Whether a run is queued to be resumed after this turn (woken, or fresh and not yet
        started): a callback must not keep the turn (a native pump's stay) while one waits."""
        return bool(self._runq or self._fresh or self._woken)

    def _wake(self, carried: Carried) -> None:
        if carried in self._carried:
            self._runq[carried] = None

    def enlist(self, run: RunState) -> None:
        """``run`` (asked from its first step) is live: a stop of the host or of its group ends
        it, and one that came before it began ends it before its child starts."""
        self.runs.add(run)
        source = self.stop_source
        carried = self._current
        if carried is not None:
            carried.run = run
            carried.group.runs.add(run)
            source = source or carried.stopped or carried.group.stop_source
        if source is not None:
            run.stop_signal(source)

    def delist(self, run: RunState) -> None:
        self.runs.discard(run)
        carried = self._current
        if carried is not None:
            carried.group.runs.discard(run)

    def carry(self, steps: Steps) -> object:
        """Drive one run to its end; its generator's return value (``internal`` for a run whose
        step raised)."""
        from .endings import faulted

        pending = [steps]
        result: list[object] = []
        failed = lambda exc, steps: faulted(exc)  # noqa: E731 - one use
        self.supervise([RunGroup(lambda: pending.pop() if pending else None, result.append, failed=failed)])
        return result[0]

    def carry_all(
        self, next_run: Callable[[], Steps | None], finished: Callable[[object], None], capacity: int = 1
    ) -> None:
        """Carry one group (``RunGroup``) of up to ``capacity`` runs in flight, given no
        ``failed``: a run whose step raised is the host's own failure, as ``supervise`` says
        (the batch's, whose ``finished`` needs a job no exception names)."""
        self.supervise([RunGroup(next_run, finished, capacity)])

    def supervise(self, groups: list[RunGroup]) -> None:
        """Carry ``groups`` side by side on this host's loop: each kept at up to its capacity,
        asked for another run whenever it has room. Returns once no run is in flight and no
        group has another; raises what was the host's own failure (a ``KeyboardInterrupt`` in a
        step, a ``finished`` that raised, a step's exception in a group without ``failed``),
        once every run of every group has ended: that failure stopped them all first."""
        fresh = self._fresh = []
        self._failure = None
        for group in groups:
            group.wake = self._wake
        try:
            while True:
                if self._failure is None:
                    for group in groups:
                        self._fill(group, fresh)
                if not self._carried:
                    break
                try:
                    self.loop.run_once(0.0 if self._runq or fresh else None)
                except KeyboardInterrupt as exc:  # no signal watch (yet, or a Dask worker's): stop as SIGINT would
                    self.interrupted(exc)
                self.turned()
                # Taken one at a time, so a step asking ``_others_waiting`` sees those after it.
                woken = self._woken
                woken.extend(reversed(self._runq))
                self._runq = {}
                while woken:
                    self._resume(woken.pop())
                if fresh:
                    self._resume(fresh.pop(0))
                self.settled()  # a run it wakes is resumed at the next turn, which waits for none
        finally:
            for carried in self._carried:  # only after a bug: each run's release still runs
                carried.cancel_timers()
                carried.steps.close()
            self._carried.clear()
            self._runq.clear()
            self._woken.clear()
            for group in groups:
                group.carried.clear()
                group.runs.clear()
                group.wake = None
            self.settled(last=True)  # after the releases: a held walk that raises skips none of them
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def turned(self) -> None:
        """After each turn of the loop, before the runs it woke resume: what a process's share
        adds there (``Host``: the signals caught during the turn, so they rank in it)."""

    def settled(self, last: bool = False) -> None:
        """After the runs a turn woke have resumed, and once more (``last``) as carrying ends
        (``Host``: the reap the turn held back)."""

    def _fill(self, group: RunGroup, fresh: list[Carried]) -> None:
        while len(group.carried) < group.capacity:
            steps = group.next_run()
            if steps is None:
                return
            carried = Carried(steps, group)
            self._carried.add(carried)
            group.carried.add(carried)
            fresh.append(carried)

    def _drop(self, carried: Carried) -> None:
        """``carried`` is no longer the host's or its group's to carry. Its loop view, run and
        wait let go: each leads back to it (the view's wake, the race's wait), and the cycle would
        leave a run's ~45 objects to the garbage collector instead of freeing them at its end."""
        self._carried.discard(carried)
        carried.group.carried.discard(carried)
        carried.loop = carried.run = carried.wait = None

    def _ended(self, carried: Carried, result: object) -> None:
        if carried.fault is not None:  # a callback's, run inside its last step: its outcome decided
            fault_dropped(carried.fault)
        self._drop(carried)
        try:
            carried.group.finished(result)
        except BaseException as exc:  # noqa: BLE001 - the carrier's own code: the host's failure
            self.interrupted(exc)

    def _resume(self, carried: Carried) -> None:
        """Resume ``carried`` if its wait is over (else leave it waiting: the wake was early)."""
        if carried not in self._carried:
            return  # ended since it was queued (a fresh run a stop woke early)
        wait = carried.wait
        raised: BaseException | None = None
        if carried.fault is None and wait is not None:
            try:
                over = wait.done() or (wait.deadline is not None and self.loop.now >= wait.deadline)
            except BaseException as exc:  # noqa: BLE001 - thrown into the run, whose step it is
                over, raised = True, exc
            if not over and carried.fault is None:  # a fault: one its ``done()`` reached (the reaper's)
                self._arm(carried, wait)
                return
        if raised is None and carried.fault is not None:  # a callback of its own raised: thrown in, whatever its wait
            raised, carried.fault = carried.fault, None
        carried.cancel_timers()
        self._current = carried
        try:
            wait = carried.steps.send(None) if raised is None else carried.steps.throw(raised)
        except StopIteration as stop:
            self._current = None
            self._ended(carried, stop.value)
            return
        except Exception as exc:  # noqa: BLE001 - the run's own failure, unless its group takes none
            self._current = None
            group = carried.group
            if group.failed is None:
                self._drop(carried)
                self.interrupted(exc)
                return
            self._ended(carried, group.failed(exc, carried.steps))
            return
        except BaseException as exc:  # noqa: BLE001 - the host must go on carrying the others
            self._drop(carried)
            self.interrupted(exc)
            return
        finally:
            self._current = None
        carried.wait = wait
        if not wait.asked:  # it may hold already: asked on the next turn, after a look at the loop
            self._runq[carried] = None
            return
        self._arm(carried, wait)

    def _arm(self, carried: Carried, wait: Wait) -> None:
        """The timers that wake a waiting run at its deadline and at its next poll."""
        if wait.deadline is not None and carried.deadline_timer is None:
            carried.deadline_timer = self.loop.call_at(wait.deadline, lambda: self._wake(carried))
        if wait.poll is not None and carried.poll_timer is None:

            def due() -> None:
                carried.poll_timer = None
                self._wake(carried)

            carried.poll_timer = self.loop.call_at(self.loop.clock() + wait.poll, due)
