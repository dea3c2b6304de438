"""A run's members: collecting the children that exit (every run's root, and the orphans a
subreaper adopts), and reading the ones that live (the stream's snapshots, teardown's counts).

Facts about reaping: a process-group run makes the runner a subreaper, so orphans of the tree
are re-parented to it and must be collected too. ``waitid(WNOWAIT)`` peeks at any exited child
without collecting it, so a root's status is left for its own ``Child`` to read; every other pid
is collected at once. One process may carry several runs: the reaper knows every live root, so
a root is never taken for an orphan, and each one's exit is routed to the run that spawned it.
A process that never became a subreaper (every run in a cgroup) has no orphans to collect, and
collects only its roots, by pid: a host inside someone else's program (``processkit.batch``)
never takes the status of a child that program started itself. Before the first root is
watched nothing is collected: a child the process inherited waits for a run.
"""

from __future__ import annotations

import os
import time

from ..diagnostics import warn
from ..events.types import MembersSnapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Protocol

    from ..containment.members import Member
    from ..events.emitter import Emitter
    from ..loop import Loop
    from .spawn import Child

    class MemberOwner(Protocol):
        """What the member readers need of a run (its state is one): where snapshots go, the
        process's reaper, and the container's members."""

        events: Emitter
        reaper: Reaper

        def read_member_list(self) -> list[Member]: ...


class Reaper:
    """The live roots of one process (pid -> its child, pidfd and exit callback)."""

    def __init__(self, loop: Loop):
        self._loop = loop
        self._roots: dict[int, tuple[Child, int | None, Callable[[int], None]]] = {}
        self._adopting = False  # a run made this process a subreaper: orphans are collected too

    def watch(self, child: Child, on_exit: Callable[[int], None], adopts_orphans: bool) -> None:
        """Route ``child``'s exit to ``on_exit(ended_ns)``: its pidfd wakes the loop where the
        kernel gives one (from the clone itself on the native path), SIGCHLD otherwise.
        ``adopts_orphans``: its run made this process a subreaper (for good)."""
        pidfd = child.pidfd
        if pidfd is None:
            try:
                pidfd = os.pidfd_open(child.pid)
            except (AttributeError, OSError):
                pass  # SIGCHLD alone announces the exit
        self._roots[child.pid] = (child, pidfd, on_exit)
        self._adopting = self._adopting or adopts_orphans
        if pidfd is not None:
            self._loop.add_reader(pidfd, self.reap)
        self.reap()

    def reap(self) -> None:
        """Collect every exited child, routing a root's status to its run."""
        roots = self._roots
        while self._adopting:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            if info is None:
                break
            entry = roots.get(info.si_pid)
            if entry is not None:
                entry[0].wait()
                self._exited(info.si_pid)
            else:
                try:
                    os.waitpid(info.si_pid, 0)
                except ChildProcessError:
                    pass
        for pid in [pid for pid, entry in roots.items() if entry[0].poll() is not None]:
            self._exited(pid)

    def _exited(self, pid: int) -> None:
        ended_ns = time.monotonic_ns()
        _, _, on_exit = self._roots[pid]
        self.forget(pid)
        on_exit(ended_ns)

    def forget(self, pid: int) -> None:
        """Stop watching a root (collected, or given up on by a run that is releasing)."""
        entry = self._roots.pop(pid, None)
        if entry is not None and entry[1] is not None:
            self._loop.remove_reader(entry[1])
            os.close(entry[1])


def emit_snapshot(run: MemberOwner, reason: str) -> None:
    try:
        found, read_error = run.read_member_list(), False
    except OSError:
        found, read_error = [], True
    if read_error:
        warn("could not read the container's members")
    run.events.emit(MembersSnapshot(reason=reason, read_error=read_error, members=[m.as_event() for m in found]))


def live_members(run: MemberOwner) -> list[int] | None:
    """Members that have not exited yet (zombies awaiting a reaper do not count)."""
    run.reaper.reap()
    try:
        return [m.pid for m in run.read_member_list() if not m.zombie]
    except OSError:
        return None
