"""The process that carries runs: the scheduler (``scheduler``) and the process's share of every
run on it, each in a module of its own: the signal watch (``signals``), the reaping
(``reaper``) and the lodging (``control.lodging``). This module only puts them together, so
every carrier (``run``, ``batch``, a bench session, the runner service, a Dask worker's chunk)
makes one ``Host`` and needs nothing else.

Facts about signals in such a process: a signal is the process's, not a run's. A stop signal
(SIGINT, SIGTERM, SIGHUP) ends every live run, as the runner's own stop did; SIGCHLD goes to the
reaper once it asks for it (a root without a pidfd, orphans adopted: each root's pidfd announces
its exit otherwise), which routes each root's exit to its run; SIGWINCH to the terminal of a
``--pty`` run; SIGTSTP stops every run's tree and then the process, as a job (``signals``), and
so does SIGTTOU (a background job's write on a terminal with ``tostop``), but in its handler, not
from the loop, since the interpreter retries the failed write at once; once continued, each run
is told so (``RunState.continued``: its idle deadline, a lent terminal lent again). SIGCONT is
also watched for itself (``watch_continue``): a shell's ``bg`` then ``fg`` continues a runner
already running, and a ``--pty`` run's keyboard takes raw mode back at each. The
runner service (``service``) carries the API's runs in a process of its own, so its host watches
signals as the CLI's does; a host with ``watch=False`` (a Dask worker's chunk, on a thread of
someone else's process) installs no handler and sets no process-wide flag: its roots' exits come
through their pidfds.
"""

from __future__ import annotations

from ..loop import Loop
from ..signum import SIGCONT, SIGSTOP, SIGTSTP
from .reaper import Reaper
from .rungroup import RunGroup
from .scheduler import Scheduler
from .signals import watch_for_host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..control.lodging import Lodging
    from .signals import SignalWatch
    from .spawn import Starting

__all__ = ["Host", "RunGroup"]


class Host(Scheduler):
    """``watch``: whether the runs may take the process's signals (``run``, ``batch``, the
    runner service: each a process of its own); a host inside someone else's process (a Dask
    worker's thread) leaves them alone, and its roots' exits reach the reaper through their
    pidfds; that process's own code collects children too, unseen, into the counter a
    process-group run's CPU and I/O are read from, so no run there reports them
    (``ChildrenUsage.unseen``)."""

    def __init__(self, watch: bool = True) -> None:
        super().__init__(Loop())
        self._watch = watch
        self.reaper = Reaper(self.loop, may_adopt_orphans=watch)
        self._signals: SignalWatch | None = None
        self.lodging: Lodging | None = None  # a batch's one directory, which its runs borrow slots in
        self.alone = False  # carries one run and no other (``run``): its setup may wait on a pipe
        self.backends: tuple[str, str] | None = None  # the pump's and the spawn's, from its first run (``launch``)
        # the warnings said once among the host's runs: a failed echo write's (stream name, (st_dev,
        # st_ino)), a run's stream's or registry's failure (``diagnostics.warn_once``)
        self.said: set[tuple] = set()
        self._continue_hooks: dict[object, Callable[[], None]] = {}  # each live run's (``watch_continue``)
        self._stop_checks: dict[object, Callable[[], None]] = {}  # ``watch_child_stops``
        self._unseen = not watch  # counted in ``ChildrenUsage.unseen`` until ``close``: last, nothing after raises
        if self._unseen:
            from ..containment.accounting import ChildrenUsage

            ChildrenUsage.unseen(1)

    @property
    def may_adopt_orphans(self) -> bool:
        """Whether a run may make this process a subreaper, and its reaper collect every child
        that is no run's root: only where the process is the host's own (``watch``)."""
        return self._watch

    def lodge(self, label: str) -> None:
        """Lodge the runs carried from here in one directory of the host's (``control.lodging``)."""
        from ..control.lodging import lodge

        self.lodging = lodge(label)

    def watch_signals(self, resize: Callable[[], None] | None = None) -> None:
        """From here a stop signal ends the runs through their release instead of killing the
        process and orphaning what they made. Once per process; ``resize`` follows SIGWINCH."""
        if self._signals is None and self._watch:
            self._signals = watch_for_host(
                self.loop, self.stop, self.reaper, resize, self.signal_trees, self._children_stopped
            )

    def watch_continue(self, key: object, hook: Callable[[], None]) -> None:
        """``hook`` at every SIGCONT the runner gets, not only at the end of its own stop
        (``suspend``): a shell's ``bg`` then ``fg`` continues a runner already running, and only
        the signal tells it that it may be the foreground job again (a ``--pty`` run's keyboard
        takes raw mode back: ``Keyboard.raw_again``). One watch for the host, calling the hook
        of every run that registered one (``key``, its run) until ``unwatch``: the
        runner service carries one ``--pty`` run after another, and each must get its own."""
        if self._signals is None:
            return
        self._signals.watch(SIGCONT, self._continued)  # once: a second watch of it is a no-op
        self._continue_hooks[key] = hook

    def watch_child_stops(self, key: object, check: Callable[[], None]) -> None:
        """``check`` at every SIGCHLD until ``unwatch``: a run that lent its terminal to
        its child looks whether the child was stopped there (Ctrl-Z), to stop as a job with it
        (``lending``). A host that lends watches SIGCHLD already: its reaper adopts orphans."""
        if self._signals is not None:
            self._stop_checks[key] = check

    def unwatch(self, key: object) -> None:
        """No more SIGCONT hook nor stop check for ``key`` (its run released its keyboard or its
        terminal): nor are they kept."""
        self._continue_hooks.pop(key, None)
        self._stop_checks.pop(key, None)

    def _continued(self, signum: int) -> None:
        for hook in list(self._continue_hooks.values()):
            hook()

    def _children_stopped(self) -> None:
        for check in list(self._stop_checks.values()):
            check()

    def signal_trees(self, signum: int) -> None:
        """``signum`` to every member of every live run (SIGTSTP and SIGCONT: ``signals.suspend``);
        after SIGCONT each run is told it was continued (``RunState.continued``). A ``--pty``
        run's tree gets SIGSTOP for SIGTSTP: its child leads a session of its own, so its group
        is orphaned, and the kernel discards the terminal's stop signals there (POSIX) where
        they would stop a process; SIGSTOP stops it, and SIGCONT continues it as any tree."""
        for run in self.runs:
            if run.container is not None:
                try:
                    run.container.signal_members(SIGSTOP if signum == SIGTSTP and run.spec.pty else signum)
                except OSError:
                    pass  # a member read that failed: that tree is left as it is
            if signum == SIGCONT:
                run.continued()

    def dispatch_caught_signals(self) -> None:
        """Deliver the signals caught so far (the runner does just before it spawns, and after
        every turn: ``turned``): the wake-up pipe is read only where a handler noted one."""
        if self._signals is not None:
            self._signals.dispatch_caught()

    def turned(self) -> None:
        """A signal whose handler ran during the turn is dispatched in it, so it ranks there
        (docs/run.md §1.3). On a loaded machine a SIGTERM sent to a runner not yet given a CPU,
        before its child exits, is delivered only as the wait that found the exit returns: the
        kernel hands a woken wait its events before it looks for a signal, so the wait's results
        hold the exit and not the signal's byte, and the exit used to win."""
        self.dispatch_caught_signals()

    def settled(self, last: bool = False) -> None:
        """The walk a SIGCHLD's reap held back during the turn, and the next turn's held back
        too, but after the ``last``: ``Reaper.holding``."""
        self.reaper.walk_held(holding=not last)

    def dispatch_signal_pipe(self) -> None:
        """Deliver the signals whose bytes are in the wake-up pipe, read even where no handler
        has noted one yet: a wait on ``signal_fd`` that ended for its byte (read, it cannot end
        the next wait at once again)."""
        if self._signals is not None:
            self._signals.dispatch()

    def exec_waited(self, starting: Starting, stopped: Callable[[], bool]) -> bool:
        """Wait in the spawn for the exec's report (a run on a host that carries it alone, or one
        that lingers: ``launch._exec_reported``, ``bench``'s direct sample), the signal watch's
        wake-up pipe too: a signal caught before the wait (during the clone) interrupts no wait,
        and only its byte ends this one. False when a stop came (``stopped()``, its signals
        dispatched) while the child was still in its exec."""
        while not starting.until_signal(self.signal_fd):  # a signal came: its handler has run
            self.dispatch_signal_pipe()  # the pipe read: the next wait blocks again
            if stopped() and not starting.ready():
                return False
        return True

    def stopped_since(self, stops: int) -> bool:
        """Whether a stop came since ``stops`` (``self.stops`` then), the signals caught so far
        dispatched first (a look at a flag where none came): a batch's second Ctrl-C."""
        self.dispatch_caught_signals()
        return self.stops != stops

    @property
    def signal_fd(self) -> int:
        """The signal watch's wake-up pipe, readable once a watched signal came; -1 unwatched."""
        return self._signals.fd if self._signals is not None else -1

    def close(self) -> None:
        """Stop watching signals (the stop signals' handlers stay, so late ones are absorbed) and the loop;
        give back the lodging, after every run it lodged. A stop caught before the watch ends
        (during the lodging's close, say) is dispatched first, so ``stop_source`` names it: a
        carrier that asks after its close (a bench session) stops as for one during its last
        run; one that does not (``run``, whose teardown absorbs repeat signals; ``batch``, whose
        tally was taken) is unchanged. The host's ``ChildrenUsage.unseen`` count is given back
        whatever raises before."""
        try:
            if self.lodging is not None:
                self.lodging.close()
                self.lodging = None
            if self._signals is not None:
                self._signals.dispatch_caught()
                self._signals.close()
                self._signals = None  # nothing more to dispatch: its pipe is gone
            self.reaper.close()
            self.loop.close()
        finally:
            if self._unseen:
                from ..containment.accounting import ChildrenUsage

                ChildrenUsage.unseen(-1)
                self._unseen = False
