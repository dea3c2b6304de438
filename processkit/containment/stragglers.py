"""A run's v1 groups removed once the run is over, and the processes still in them then: each
moved up into the group above (the runner's own, for a group it made) so the group can go, and
recorded here (``MOVED_UP``), for that move makes such a process look like the caller's.

Under cgroup v2 runs the run's v2 group is empty by then (its kill is confirmed): a process
still in a run's v1 group is one that left its v2 group (root writing ``cgroup.procs``); under a
process group, a member that left the group (``setsid``). Either outlived the teardown. The
caller's processes are never in a run's group, so once moved up nothing else would tell them
from the caller's: one that moved into the runner's own v2 group reads, after the move, as in
the runner's own groups everywhere (``leftovers.v2_keeps``). The record keeps that fact for the
sweep of a ``batch`` or ``bench``, which looks once its runs are released: each entry is a pid
and its start time, so a later process given the same pid is not taken for it.
"""

from __future__ import annotations

import os

from .cgroupfs import RMDIR_ATTEMPTS, below, member_pids, remove_group
from .members import read_member

MOVED_UP: dict[int, str | None] = {}  # pid -> its start time: moved up out of a run's v1 group
# Past this many, the dead are dropped before another is recorded: a long-lived process whose
# runs' stragglers are never looked for (process-group runs alone) keeps no growing record.
RECORD_MOST = 256


def remove_v1_group(path: str, attempts: int = RMDIR_ATTEMPTS) -> bool:
    """Remove a v1 group whose run is over: ``rmdir`` first (the tree is gone: the common case,
    with nothing to read first), else the stragglers of each group below it moved up into the
    group above, deepest first, then its own out, and the removal retried (``remove_group``);
    whether it is gone."""
    if remove_group(path, 1):
        return True
    for group in [*below(path), path]:
        _evacuate(group)
    return remove_group(path, attempts)


def _evacuate(path: str) -> None:
    """Move any process still in the group to its parent so the group can go, recording each
    (``MOVED_UP``): it keeps running, but the run's group must not outlive the run."""
    try:
        stragglers = member_pids(path)
        if not stragglers:
            return
        parent = os.open(os.path.join(os.path.dirname(path), "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return  # the rmdir that follows then fails and the group stays: nothing more to try
    if len(MOVED_UP) >= RECORD_MOST:
        forget_gone()
    try:
        for pid in stragglers:
            member = read_member(pid)
            if member is not None:
                MOVED_UP[pid] = member.start_time  # before the move: from then on it reads as the caller's
            try:
                os.write(parent, str(pid).encode())
            except ProcessLookupError:
                pass  # exited meanwhile
    finally:
        os.close(parent)


def moved_up(pid: int) -> bool:
    """Whether ``pid`` is a process this one moved up out of a run's v1 group (the same start
    time: not a later process given its pid)."""
    if pid not in MOVED_UP:
        return False
    member = read_member(pid)
    return member is not None and member.start_time == MOVED_UP[pid]


def forget_gone() -> None:
    """Drop the record of each process that is gone (or whose pid another has now): the record
    lasts as long as what it names, in a process that runs many runs."""
    for pid in [pid for pid in MOVED_UP if not moved_up(pid)]:
        del MOVED_UP[pid]
