"""Fallback containment: the root child leads a fresh process group; the runner is a subreaper
when it owns its process (``containment.create``; not inside a caller's program, whose
process-wide flags stay its own).

A member that calls ``setsid`` or moves itself to another group escapes this boundary; that is
the mechanism's documented limit and why cgroup v2 is preferred where the host allows it.

The group's identity (its id, its leader's start time, the session) is written to the run's
directory, so that once the runner is dead a reaper can tell the run's group from a later one
that got the same id (``sweep``).
"""

from __future__ import annotations

import os

from .. import signum as signals
from ..rundir import RunDir
from . import members
from .accounting import ChildrenUsage, Tally
from .base import Container


class ProcessGroup(Container):
    mechanism = "process_group"
    accounts = False  # the reference's fallback keeps none: the stream's summary is all null
    live_io = True  # the subreaper's rusage has the reaped members' I/O, /proc the live ones'

    def __init__(self, rundir: RunDir | None) -> None:
        self._pgid: int | None = None
        self._rundir = rundir
        self._children = ChildrenUsage()

    def cloned(self, pid: int) -> None:
        """The group is known from the clone: a SIGTSTP the runner passes on to its tree (Ctrl-Z)
        while the child is still in its exec reaches it too, where the runner stopped and the
        child, adopted later, ran on. (A group the child has not made yet is no one's: ESRCH.)"""
        self._pgid = self._children.group = pid

    def adopt(self, pid: int) -> None:
        self._pgid = self._children.group = pid
        leader = members.read_member(pid)
        if self._rundir is not None and leader is not None and leader.start_time is not None:
            self._rundir.record_process_group(pid, leader.start_time, os.getsid(0))

    def member_pids(self) -> list[int]:
        if self._pgid is None or not _anyone_in(self._pgid):
            return []
        found = (members.read_member(pid) for pid in members.all_pids())
        return [m.pid for m in found if m is not None and m.pgid == self._pgid]

    def holds(self, pid: int) -> bool:
        """One ``getpgid``, not a walk of every process of the host; raises ProcessLookupError
        for one gone (``Container.holds``)."""
        return self._pgid is not None and os.getpgid(pid) == self._pgid

    def signal_members(self, signum: int) -> None:
        if self._pgid is None:
            return
        try:
            os.killpg(self._pgid, signum)
        except ProcessLookupError:
            pass

    def kill_all(self) -> None:
        self.signal_members(signals.SIGKILL)

    def _account(self, tally: Tally, live: members.LiveUsage | None = None) -> None:
        self._children.offer_to(tally, live if live is not None else members.usage_of(self.member_pids()))

    def _remove(self) -> None:
        self._children.close()


def _anyone_in(pgid: int) -> bool:
    """Whether any process (a zombie included) is in the group: one ``kill(-pgid, 0)``, so the
    usual question once the root has gone (is anyone left?) costs no read of every ``/proc``
    entry, which a batch asked several times a job."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone is there, just not ours to signal
        pass
    return True
