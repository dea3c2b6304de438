"""The host's reaping: collecting the children that exit, every run's root and the orphans a
subreaper adopts, each root's exit routed to its own run. Apart from the members a run reads
(``snapshot``, ``teardown``) because it is the process's, shared by every host in it, not a run's.

Facts about reaping, in a process that may not be the runner's own:
- Every root is collected by its pid (``waitpid(pid)``), once its pidfd says it exited (the
  kernel says which child: no look at every root per wake-up), or, where the native spawn
  lingered for its exit (``bench``'s runs), at once by the one look ``watch`` takes first. A process may hold several
  hosts (a Dask worker running two chunks on two threads) beside children its own program
  started (``subprocess.Popen``): each host collects only the roots it spawned, so no other
  party's status is ever taken. The table of every root in the process (``_ROOTS``, under a
  lock) is what tells a root from an orphan.
- Only a process the runner owns (a host with ``watch``: the CLI's, the runner service's) becomes a subreaper, for a
  run of either mechanism: orphans of the tree are then re-parented to it and must be collected too
  (promptly: a zombie is charged to its cgroup's ``pids.current`` until collected).
  ``waitid(P_ALL, WNOWAIT)`` peeks at an exited child without collecting it; a root's status is
  left for its own ``Child`` to read, every other pid is collected. A host inside someone
  else's process never peeks at every child and never sets the flag: the tree's orphans go to
  init, and a process-group run is still ended through its group.
- Without a pidfd (an old kernel) a root's exit is found by SIGCHLD where the host watches
  signals, and by a poll of those roots alone (every 50 ms) in any case. The host watches
  SIGCHLD only once the reaper asks (``wants_sigchld``: a root without a pidfd, or orphans to
  collect), as a run's race begins; an orphan adopted since its spawn that exited before then,
  its SIGCHLD dropped at the default, is collected on the loop's next turn (the watch supplies
  one SIGCHLD as it is taken: ``signals.watch_for_host``), not left a zombie until the next
  SIGCHLD (the run's own end, for a quiet one).
"""

from __future__ import annotations

import _thread
import os
import time

from ..containment.accounting import ChildrenUsage
from . import claims

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..loop import Loop
    from .child import Child


UNANNOUNCED_POLL_SECONDS = 0.05
_ROOTS: dict[int, Reaper] = {}  # every live root in this process -> the reaper of the host that spawned it
_ROOTS_LOCK = _thread.allocate_lock()  # the builtin lock: no start-up import


class Reaper:
    """One host's share of the process's reaper: its live roots (pid -> child, pidfd, exit
    callback). ``may_adopt_orphans``: the host's process is its own (a host with ``watch``), so
    its runs make it a subreaper, whose orphans are collected here."""

    def __init__(self, loop: Loop, may_adopt_orphans: bool = True):
        self._loop = loop
        self._may_adopt_orphans = may_adopt_orphans
        self._roots: dict[int, tuple[Child, int | None, Callable[[int], None]]] = {}
        self._unannounced: set[int] = set()  # roots without a pidfd: looked at on each reap
        # Orphans are collected once this host watches a root (``may_adopt_orphans``), not before:
        # a host's first run that ends before its race (its terminal refused, ``Launched.handoff``)
        # reaps with its root unwatched, whose status a peek at every child would take as an orphan's.
        self._adopting = False
        self.wants_sigchld: Callable[[], None] | None = None  # the host's, to watch SIGCHLD from then on
        # While the host carries its runs, from the end of one turn's resumptions to the next's
        # (``Host.settled``), a SIGCHLD's peek that shows a child not this host's to take leaves
        # the walk of the kernel's list to ``walk_held`` there: the child is most often a spawn
        # whose exec that turn reports, a root the peek then takes itself (at ``-j2`` about one
        # job in two walked the list). A reap a run asks for itself (its tree's read) walks at once.
        self.holding = False
        self._held = False

    def watch(self, child: Child, on_exit: Callable[[int], None], look_first: bool = False) -> None:
        """Route ``child``'s exit to ``on_exit(ended_ns)``: its pidfd wakes the loop where the
        kernel gives one (from the clone itself on the native path), SIGCHLD otherwise. Where
        the host may adopt orphans its run made this process a subreaper (for good), and every
        orphan is collected from then on. ``look_first``: the spawn lingered for the child's exit
        (``RunContext.linger_ms``: ``bench``'s runs), so it has most often exited already: it is
        collected here, at once, with no registration of its pidfd in the loop, no removal and
        no loop turn to hear of it (one ``wait4`` more when it still runs)."""
        pid = child.pid
        pidfd = child.pidfd
        if pidfd is None:
            try:
                pidfd = os.pidfd_open(pid)
            except (AttributeError, OSError):
                pass  # SIGCHLD, or the reaper's polls, announce the exit
        with _ROOTS_LOCK:
            _ROOTS[pid] = self
        self._roots[pid] = (child, pidfd, on_exit)
        self._adopting = self._may_adopt_orphans
        if (pidfd is None or self._adopting) and self.wants_sigchld is not None:
            self.wants_sigchld()
        if pidfd is not None:
            if look_first and child.poll() is not None:
                self._exited(pid)  # its pidfd, never in the loop, is closed by ``forget``
                return
            self._loop.add_reader(pidfd, lambda: self._collect(pid))
        else:
            if not self._unannounced:
                self._loop.call_later(UNANNOUNCED_POLL_SECONDS, self._poll_unannounced)
            self._unannounced.add(pid)
            self._collect(pid)

    def _poll_unannounced(self) -> None:
        """Look at the roots no pidfd announces (where no SIGCHLD may either: a Dask worker's host)."""
        for pid in list(self._unannounced):
            self._collect(pid)
        if self._unannounced:
            self._loop.call_later(UNANNOUNCED_POLL_SECONDS, self._poll_unannounced)

    def _collect(self, pid: int) -> None:
        """Collect the root ``pid`` if it has exited, and route its status."""
        entry = self._roots.get(pid)
        if entry is not None and entry[0].poll() is not None:
            self._exited(pid)

    def reap(self, signalled: bool = False) -> None:
        """Collect the orphans this process adopted, and the roots no pidfd announces.
        ``signalled``: a SIGCHLD's, whose walk may be held (``holding``)."""
        while self._adopting:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None:
                break
            if not self._take(info.si_pid):
                if signalled and self.holding:
                    self._held = True
                else:
                    self._held = False  # this walk collects what a held one would have
                    self._reap_each()  # the peek shows that one first again and again: the others one by one
                break
        for pid in list(self._unannounced):
            self._collect(pid)

    def walk_held(self, holding: bool) -> None:
        """The reap ``holding`` held back, the orphans collected in the same turn once the runs
        it woke have resumed; then ``holding`` as given."""
        self.holding = False
        if self._held:
            self._held = False
            self.reap()
        self.holding = holding

    def _take(self, pid: int) -> bool:
        """Collect the exited child ``pid`` if it is this host's root or an orphan; False for
        another's: another host's root, or a child its spawner collects itself (``claims``: a
        spawn's not yet reported, the batch's page process)."""
        with _ROOTS_LOCK:
            owner = _ROOTS.get(pid)
        if owner is self:
            self._roots[pid][0].wait()
            self._exited(pid)
            return True
        if owner is not None or claims.claimed(pid):
            return False
        ChildrenUsage.reaping(pid)  # an orphan's figures enter the counter open runs read
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        return True

    def _reap_each(self) -> None:
        """Every exited child but another's, looked at one by one (the kernel's list of them)."""
        from ..containment.leftovers import children

        for pid in children(os.getpid()) or ():
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    self._take(pid)
            except ChildProcessError:
                continue

    def _exited(self, pid: int) -> None:
        ended_ns = time.monotonic_ns()
        _, _, on_exit = self._roots[pid]
        self.forget(pid)
        on_exit(ended_ns)

    def forget(self, pid: int) -> None:
        """Stop watching a root (collected, or given up on by a run that is releasing)."""
        entry = self._roots.pop(pid, None)
        if entry is None:
            return
        self._unannounced.discard(pid)
        with _ROOTS_LOCK:
            if _ROOTS.get(pid) is self:
                del _ROOTS[pid]
        if entry[1] is not None:
            self._loop.remove_reader(entry[1])
            os.close(entry[1])

    def close(self) -> None:
        """Forget every root still watched (the host is closing)."""
        for pid in list(self._roots):
            self.forget(pid)
