"""What runs left outside their boundary, in a process whose children are its runs' and what it
had below it before its first run (``inherited``): once no run is live, every other descendant
of this process is a leftover of its runs, and is ended here (``bench`` after each run, ``run``
once its cgroup v2 group was killed (``cleanup_finished`` lists them) or, under process-group
containment, once its run has ended, ``batch`` once its runs have ended).
Facts that shape this:
- A process-group boundary holds the group alone: a member that calls ``setsid`` (a daemon) or
  ``setpgid`` leaves it, and teardown's kill of the group misses it (``process_group``).
- A cgroup v2 boundary holds what ``setsid`` and double forks make, but a member whose user may
  write another group's ``cgroup.procs`` (root, or the owner of a delegated subtree, for a
  group within it) moves itself out, and the kill of the run's group misses it.
- The runner of either mechanism is a subreaper, so such a process, once orphaned, is
  re-parented to the runner, never to init: whatever it does, it stays a descendant of the
  runner. Only a process someone else starts on the run's behalf (a service manager, ``at``),
  or one orphaned in a pid namespace whose init is no run's (root's ``nsenter -p``: it goes to
  that init), is out of reach; nothing here can see it.
- The kernel lists a task's children in ``/proc/<pid>/task/<tid>/children``
  (``CONFIG_PROC_CHILDREN``); without that file every ``/proc`` entry's parent is read.
- ``waitid(P_ALL, WNOHANG | WNOWAIT)`` fails with ``ECHILD`` when a process has no child at all,
  live or not: the usual case (a group that held everything) costs that call. A process no
  run made a subreaper (``prctl.made_subreaper``: a host in someone else's program) is not looked
  at: nothing of its runs came to it.
- Each run's root leads a group of its own, so a descendant in this process's own process group
  is either the caller's own (``bench``'s helpers: spared there) or a run's member that joined
  that group (``setpgid`` to this process's group, which the kernel allows within one session),
  which the teardown's kill of the run's group misses as well. Where the caller's own are known
  (``run`` and ``batch``: ``inherited``, and nothing of theirs left by the sweep), the sweep
  takes those members too (``own_group``).
- A process's children may predate its runs: a shell's ``cmd & exec processkit-cli run ...``
  hands its children to the runner across exec. Those (and what was below them then) are no
  run's: ``inherited`` lists them before the first run (only when ``waitid`` says there is a
  child at all, so a plain run pays that one call), and they and their subtrees are spared.
  What they fork later and orphan comes to this subreaper too, outside their subtrees: so the
  process groups and sessions they were in are spared as well (a run's root leads a group of
  its own, and a run's ``setsid`` makes a session of its own; neither can be one of those
  while one of their members lives). The runner's own session is not among them (a run's
  members share it until one calls ``setsid``), and where an inherited process is in the
  runner's own group, that group is spared whatever ``own_group`` says: the caller's jobs there
  cannot be told from a run's member that joined it.
- Under cgroup v2 runs (``v2_keeps``) a descendant's own ``/proc/<pid>/cgroup`` tells more: one
  in this process's own group (as it first looked for its runs' parent), where a run's members
  never are unless one moved itself exactly there, is the caller's (a background job that
  daemonized while a run ran, orphaned to this subreaper outside every subtree, group and
  session ``inherited`` knew): it is not ended, unless a v1 hierarchy still holds it in a run's
  group (a hybrid host's accounting groups, there until the run's release, which moves what is
  left in them up to this process's own, recording each it moves, ``stragglers.MOVED_UP``: the
  caller's are never in one), where it is a run's that moved. A ``run``'s teardown looks once its group's kill is confirmed (``Tearing``): one
  still in that group or below is a member that outlived the kill (one that cannot die yet, or
  one that left and came back between the teardown's read of the group and this look): ended
  all the same, once, listed by the teardown and not said to have left. Any other, in a group
  named as a run's or not, left its run's group: ended and said. Every sweep comes once no run
  of this process is live (a ``run``'s teardown, once its group's kill is confirmed; ``bench``
  between runs; ``batch`` once every job has ended and been released). Under process-group
  runs nothing tells them apart: a run's v1 accounting groups are gone by the time the sweep
  looks, and what outlived them was moved to this process's own.
- A descendant found by its pid may be gone by the time it is killed, and its pid handed on (its
  parent collected it; a busy host's pids cycle): one whose parent, read then, is neither this
  process nor another descendant found is none of its runs' and is left alone; the others are
  killed through ``members.signal_found``, pinned by a pidfd, once the start time read then and
  the spare checks, asked again of the process pinned, show it is still one to end (a pid handed
  on before that read to a spared process's new child passes the parent check).
- A descendant may have changed its user (``sudo -b``, a setuid program): ``kill`` is refused
  (EPERM); it is left running, not counted as ended, and listed to the caller.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from .. import signum
from . import V2_OWN, V2_PARENTS, cgroupfs, has_children
from .accounting import ChildrenUsage
from .members import all_pids, read_member, signal_found, started_at

ROUND_PAUSE_SECONDS = 0.001
BOUND_SECONDS = 1.0


def children(pid: int) -> list[int] | None:
    """``pid``'s children from the kernel's own list; None where the kernel keeps none."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found += [int(child) for child in handle.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{task}"):
                continue  # the thread is gone
            return None
        except OSError:
            continue
    return found


def descendants(root: int, spare: frozenset[int] = frozenset()) -> list[int]:
    """Every process below ``root`` (zombies included), parents before their children, but
    those in ``spare`` and everything below them."""
    found: list[int] = []
    pending = [root]
    while pending:
        below = children(pending.pop())
        if below is None:
            return _descendants_by_scan(root, spare)
        below = [pid for pid in below if pid not in spare]
        found += below
        pending += below
    return found


def _descendants_by_scan(root: int, spare: frozenset[int]) -> list[int]:
    by_parent: dict[int, list[int]] = {}
    for member in filter(None, (read_member(pid) for pid in all_pids())):
        if member.ppid is not None and member.pid not in spare:
            by_parent.setdefault(member.ppid, []).append(member.pid)
    found: list[int] = []
    pending = [root]
    while pending:
        children = by_parent.get(pending.pop(), [])
        found += children
        pending += children
    return found


class Inherited:
    """What this process had below it before its first run (``inherited``): the processes, and
    the process groups and sessions (but this process's own session) they were in."""

    __slots__ = ("pids", "groups", "sessions")

    def __init__(self, pids: frozenset[int] = frozenset()) -> None:
        self.pids = pids
        groups, sessions = set(), set()
        for pid in pids:
            try:
                groups.add(os.getpgid(pid))
                sessions.add(os.getsid(pid))
            except ProcessLookupError:
                continue  # gone (or a zombie's entry gone): nothing of it left to spare
        sessions.discard(os.getsid(0))
        self.groups, self.sessions = frozenset(groups), frozenset(sessions)

    def holds(self, pid: int) -> bool:
        """Whether ``pid`` is in one of the groups or sessions the inherited processes were in."""
        return os.getpgid(pid) in self.groups or os.getsid(pid) in self.sessions


NOTHING = Inherited()


def inherited() -> Inherited:
    """This process's descendants now, before its first run, and their groups and sessions: none
    of them is a run's (a shell's background job, handed over across ``exec``). One ``waitid``
    when there is none."""
    if not has_children():
        return NOTHING
    return Inherited(frozenset(descendants(os.getpid())))


def v2_keeps() -> Callable[[int], bool] | None:
    """Whether a descendant is the caller's, by its cgroup v2 group: in this process's own group
    as it first looked for its runs' parent (``V2_OWN``: a run's process may move this process
    since), in no run's v1 group and never moved up out of one (``stragglers.MOVED_UP``) (a
    hybrid host's: no caller's process is in one, so one there is a run's that moved); None
    where no run of this process had a v2 group. Compared as ``/proc/<pid>/cgroup`` shows
    groups, as ``CgroupV2.holds`` compares them."""
    own = V2_OWN[0] if V2_OWN else None  # where this process was as its first run began, not now
    if not V2_PARENTS or own is None:
        return None
    from .cgroup_v2 import cgroup_lines, v2_line
    from .stragglers import forget_gone, moved_up

    ours = f"/{cgroupfs.RUN_PREFIX}{os.getpid()}-"
    forget_gone()

    def keeps(pid: int) -> bool:
        try:
            lines = cgroup_lines(pid)
        except OSError:
            return False  # gone: its kill says so
        if v2_line(lines) != own or moved_up(pid):
            return False
        return not any(ours in line for line in lines if not line.startswith("0::"))

    return keeps


class Tearing:
    """The group a run's teardown is ending once its kill is confirmed (``holds``: ``Container.holds``),
    and what of the run the sweep met still in it (``met``): a member that cannot die yet, or
    one that left and came back between the teardown's read of the group and the sweep's look.
    Those are killed once and are the teardown's to list, never said to have left."""

    __slots__ = ("holds", "met")

    def __init__(self, holds: Callable[[int], bool]) -> None:
        self.holds = holds
        self.met: list[int] = []

    def has(self, pid: int) -> bool:
        try:
            return self.holds(pid)
        except OSError:
            return False  # gone: its kill says so


def end_descendants(
    bound: float = BOUND_SECONDS,
    spare: Inherited = NOTHING,
    refused: list[int] | None = None,
    own_group: bool = False,
    tearing: Tearing | None = None,
    names: dict[int, str] | None = None,
) -> list[int]:
    """SIGKILL every descendant of this process outside its own process group, but ``spare``
    (``inherited``), their subtrees and the members of their groups and sessions, round after
    round (what they forked meanwhile comes to this subreaper), and collect the ones that were
    its children; returns those ended, by pid: alive when found (a zombie, such as a run's root
    a failing run left unreaped, is collected and not counted). One whose kill is refused
    (another user's now) is appended to ``refused`` and left alone. ``own_group``: this
    process's own group's members too (none of them is the caller's, unless ``spare`` had one
    there: then the group is spared). Under cgroup v2 runs, one ``v2_keeps`` takes for the
    caller's is left alone too, and one in ``tearing``'s group is killed once and appended to
    ``tearing.met`` (alive when found, or refusing the kill), not returned: it never left, or
    came back. Within ``bound`` seconds. ``names``: each one ended's name, as its ``stat`` read
    before the kill gave it, for the words that say what was ended."""
    if not has_children():
        return []
    group = -1 if own_group else os.getpgid(0)  # -1: no group spared
    keeps = v2_keeps()
    ended: set[int] = set()
    denied: set[int] = set()
    held: set[int] = set()  # in ``tearing``'s group and killed: one that cannot die yet is not killed again
    deadline = time.monotonic() + bound

    def ends(pid: int) -> str | None:
        """Whether the sweep ends ``pid``: "held" (in ``tearing``'s group), "found", or None
        (spared); raises ProcessLookupError for one gone."""
        if os.getpgid(pid) == group or spare.holds(pid):
            return None
        if tearing is not None and tearing.has(pid):
            return "held"
        return "found" if keeps is None or not keeps(pid) else None

    def still_ends(start_time: str | None) -> Callable[[int], bool]:
        """At the pin: the one read (its start time) and still one to end (``ends`` asked
        again: its pid may have gone, before that read, to a new child of a spared process)."""
        same = started_at(start_time)
        return lambda pid: same(pid) and ends(pid) is not None

    while True:
        found = []
        below = descendants(os.getpid(), spare.pids)
        for pid in below:
            try:
                kind = None if pid in denied or pid in held else ends(pid)
            except ProcessLookupError:
                continue
            if kind == "held":
                held.add(pid)
            if kind is not None:
                found.append(pid)
        tree = {os.getpid(), *below}
        for pid in found:
            member = read_member(pid)
            if member is None or member.ppid not in tree:
                continue  # gone, or its pid handed on to a process that is none of ours
            try:
                signal_found(pid, signum.SIGKILL, still_ends(member.start_time))
            except ProcessLookupError:
                continue
            except PermissionError:
                denied.add(pid)
                if pid in held and tearing is not None:
                    tearing.met.append(pid)  # still in the run's group: listed there, never said as left
                elif refused is not None:
                    refused.append(pid)
                continue
            if member.zombie:
                continue
            if pid not in held:
                ended.add(pid)
                if names is not None:
                    names[pid] = member.name or "?"
            elif tearing is not None:
                tearing.met.append(pid)
        for pid in found:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    ChildrenUsage.reaped(None)  # a run's leftover: no run's figure, should one be open
            except ChildProcessError:
                pass  # a grandchild: its parent's death hands it here for the next round
        if not set(found) - denied or time.monotonic() >= deadline:
            return sorted(ended)
        time.sleep(ROUND_PAUSE_SECONDS)
