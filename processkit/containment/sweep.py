"""Ending and removing what runners that died abruptly (SIGKILL, the OOM killer, a crash) left
behind: the members of their runs' groups, the groups, and the runs' directories.

Facts about deciding that a runner is dead, and what may then be ended:
- The only evidence is the lock in the run's directory (a real, private directory; its owner
  must own whatever is ended in its name) (``processkit.rundir``, ``processkit.liveness``):
  a dead process cannot hold a flock, and a live runner in any pid namespace that shares the
  file system is seen holding it. A pid is no evidence (it may be reused, or belong to a pid
  namespace this /proc does not show), nor is a missing registry entry (another registry may
  hold the run). Held: nothing of the run is touched. Free: the sweep keeps it held while it
  works, and a runner never takes an old lock again; a waiting sweep (``prune``) that finds it
  held by a process other than the run's runner (``sweep_mark.other_holder``: another sweep at
  work) waits for that one, within a bound, instead of taking the run for live. Missing or unreadable: left and reported,
  even for an empty group (a lodged host's idle one, a run's before its child joins, may be a
  live runner's that this reaper cannot see: another mount or pid namespace, another user's
  base). So a runner that could not remove a group keeps its directory (``RunDir.close``).
- A run's groups are looked for in every parent this process makes groups in, and where the
  run's directory records its v1 groups (``groups``): a v1 memory group sits under its runner's
  own group, which a runner in another session does not sweep. The record is written after the
  lock and removed before it, so a directory holding the record but no lock was emptied by an
  older sweeper that held the lock: its recorded groups are ended and the directory removed.
- A cgroup v2 group is ended with ``cgroup.kill``: the kernel kills every member, of the group
  and of every group below it (a run's process may make one and move into it), in whatever pid
  namespace, and whatever they fork meanwhile. A v1 group (the caps of a process-group run) is
  ended member by member, its groups below it too, round after round until empty, within a
  bound. Then ``rmdir``, deepest group first, which the kernel refuses while a process remains
  and which never follows a link. A SIGKILL takes
  effect when the process next runs, not when ``kill`` returns: a waiting sweep (``prune``)
  looks again until every member has exited.
- A process group is signalled only when it is provably the run's. Its id is its leader's pid,
  and the kernel hands that pid to no new process while any member of the group lives. So: a
  leader alive with the recorded start time leads the run's group; a leader alive with another
  start time means the id was handed on, so the run's group has ended. With the leader gone (the
  parent-death signal usually ends it with the runner), the members are taken as the run's only
  when every one is in the recorded session and started after the recorded leader: a later
  group with the same id would need the pid allocator to come round to that pid again and a
  process of the same session to lead a group under it. Anything else is left and reported.
- A batch's directory (``rundir.JobSlot``) speaks for every job of the batch: the jobs' groups
  are named ``processkit-run-<batch token>.j<seq>`` (``rundir.group_token``), and each job
  records its process group and v1 groups as ``j<seq>.pgroup`` and ``j<seq>.groups``; a dead
  batch's are all ended before its directory goes. Run directories are looked for in every
  one of ``rundir.bases()``.
- Groups of the older name forms (``processkit-<pid>[-<start time>]-<ns>``) have no lock: as
  before, they are removed only when empty and their runner's pid (and start time) is gone from
  this /proc, and never signalled.

- A run's sweep on its way in leaves a run that has only just died (``grace``): the first such
  sweep to find it dead marks when (``sweep_mark.dead_for``), and it is ended by the first
  run's sweep that finds it dead for ``DEAD_GRACE_SECONDS`` since, or by ``prune`` (no grace)
  at once. So the moment after a runner's SIGKILL shows what the platform alone did (the direct
  child dead by its parent-death signal, the rest of the tree alive: ``direct_child_only``),
  however many runs start meanwhile; a mark that cannot be made or trusted ends the run at once.

What is done to a run found dead is ``sweep_dead``'s (loaded only then: a run's sweep on its way
in almost never finds one). Runs sweep their own parent on the way in, ending at most
CREATE_ATTEMPTS dead runs and not waiting for killed members to exit (the next sweep removes
such a group); ``prune`` sweeps every
parent and every run directory, and waits.
"""

from __future__ import annotations

import os
import time  # every run has it loaded already (its loop, its emitter): no cost on the way in

from .. import rundir
from ..liveness import Health, probe
from .cgroupfs import RUN_PREFIX
from .members import read_member

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable

PREFIX = "processkit-"
CREATE_ATTEMPTS = 32
# How long a waiting sweep waits, in all (for others at work on dead runs, killed members' exits).
SWEEP_WAIT_SECONDS = 10.0
SWEEP_WAIT_PAUSE_SECONDS = 0.01
# How long a run's sweep leaves a run it found dead: far beyond the parent-death signal's
# delivery and a look at the tree after it, yet short against how often runs start.
DEAD_GRACE_SECONDS = 2.0


class Reaped:
    """What a sweep ended and removed (or, dry, would), and what it had to leave, and why.
    (A plain class: every run builds one on its way in, and dataclasses costs start-up.)"""

    def __init__(self) -> None:
        self.pids: set[int] = set()  # each counted once: a run has a group in every hierarchy
        self.groups: list[str] = []
        self.process_groups: list[int] = []
        self.run_dirs: list[str] = []
        self.left: list[dict] = []
        self.wait_until: float | None = None  # when a waiting sweep stops waiting for others at work
        self.graced: float | None = None  # when the first run it left for its grace is due (monotonic)

    @property
    def processes(self) -> int:
        return len(self.pids)

    def as_json(self) -> dict:
        return {
            "processes": self.processes,
            "groups": self.groups,
            "process_groups": self.process_groups,
            "run_dirs": self.run_dirs,
            "left": self.left,
        }

    def leave(self, what: str, reason: str) -> None:
        self.left.append({"what": what, "reason": reason})

    def waits_until(self) -> float:
        """The one deadline of all a waiting sweep's waits (for others at work, for killed
        members' exits), set at its first."""
        if self.wait_until is None:
            self.wait_until = time.monotonic() + SWEEP_WAIT_SECONDS
        return self.wait_until


def start_time(pid: int) -> str | None:
    """The process's start time token, or None when no process has that pid (or it is unreadable)."""
    member = read_member(pid)
    return member.start_time if member is not None else None


def orphaned(name: str) -> bool:
    """Whether ``name`` is an older-form run group whose runner is gone from this /proc."""
    if not name.startswith(PREFIX):
        return False
    parts = name[len(PREFIX) :].split("-")
    if (
        len(parts) not in (2, 3)
        or not all(part.isascii() and part.isdigit() for part in parts[:-1])
        or not parts[-1]
        or not rundir.HEX_DIGITS.issuperset(parts[-1])
    ):
        return False  # not a name a runner makes: never ours to remove
    running = start_time(int(parts[0]))
    if len(parts) == 2:
        return running is None
    return running != parts[1]


def sweep(
    where: Iterable[str],
    reaped: Reaped,
    *,
    run_dirs: Iterable[str] = (),
    vouched: Iterable[str] = (),
    groups: bool = True,
    attempts: int | None = None,
    dry_run: bool = False,
    wait: bool = True,
    grace: float = 0.0,
) -> None:
    """End and remove the runs whose groups are under ``where`` (with ``groups``) and those of
    ``run_dirs``, whose runner is dead. ``attempts`` bounds how many dead runs (and older-form groups) are
    taken on. ``vouched`` run directories are ones a stale registry entry names: an older
    version's, with no lock of their own, go on that evidence. A dead run is ended only once
    sweeps have seen it dead for ``grace`` seconds (the module's preamble). Best effort: a parent that cannot
    be listed is skipped."""
    where = list(dict.fromkeys(where))
    vouched = frozenset(vouched)
    found: dict[str, str | None] = {}  # token -> a group that names it, if one was found
    for path in [*run_dirs, *vouched]:
        found.setdefault(os.path.basename(path)[len(rundir.DIR_PREFIX) :], None)
    for parent in where if groups else ():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            token = rundir.group_token(name[len(RUN_PREFIX) :]) if name.startswith(RUN_PREFIX) else None
            if token is not None:
                if token not in found:  # a run's groups in every hierarchy name it: one probe
                    found[token] = os.path.join(parent, name)
            elif not dry_run and (attempts is None or attempts > 0) and orphaned(name):
                attempts = None if attempts is None else attempts - 1
                try:
                    os.rmdir(os.path.join(parent, name))
                    reaped.groups.append(os.path.join(parent, name))
                except OSError:
                    pass
    every: list[str] | None = None  # a run's groups may be in any of them: looked up once a dead run needs them

    def all_parents() -> list[str]:
        nonlocal every
        if every is None:  # so the live runs a run finds beside its own group cost no lookup
            every = list(dict.fromkeys(where + parents()))
        return every

    homes = rundir.bases() if found else []  # looked up once: every run found may be in any of them
    for token, group in found.items():
        if attempts is not None and attempts <= 0:
            return
        if _reap_run(token, group, all_parents, reaped, dry_run, wait, vouched, homes, grace) and attempts is not None:
            attempts -= 1


def _reap_run(
    token: str,
    group: str | None,
    parents: Callable[[], list[str]],
    reaped: Reaped,
    dry_run: bool,
    wait: bool,
    vouched: frozenset,
    homes: list[str],
    grace: float = 0.0,
) -> bool:
    """End what the run ``token`` left, if its runner is proven dead; whether it was."""
    path, owner = rundir.locate(token, homes)
    if owner is None:
        if group is not None or os.path.lexists(path):
            reaped.leave(group or path, "no private run directory speaks for it")
        return False
    if owner != os.geteuid():  # another user's (root may enter it): their run, or a decoy; never touched
        reaped.leave(group or path, "its run directory is another user's")
        return False
    waiting = _Waiting(reaped, token) if wait and not dry_run else None
    health, held = probe(path, rundir.LOCK_NAME, hold=True, again=waiting)
    if waiting is not None and waiting.asked:
        if health is Health.STALE and held is None:
            return True  # its lock gone: the other sweep ended it all and is removing its directory
        if health is Health.LIVE and waiting.holder is not None:
            reaped.leave(group or path, f"process {waiting.holder}, not its runner, still holds its lock")
            return False
    if health is Health.LIVE:
        return False
    if grace and held is not None:
        from .sweep_mark import dead_for  # a dead run's, like the rest

        seen = dead_for(path, owner, held)
        if seen is not None and seen < grace:
            os.close(held)  # its lock free again: the next sweep, or prune, takes it
            due = time.monotonic() + grace - seen
            reaped.graced = due if reaped.graced is None else min(reaped.graced, due)
            return False
    from .sweep_dead import end_run  # a dead run's: its code is loaded only when one is found

    return end_run(token, group, path, owner, health, held, parents, reaped, dry_run, wait, vouched)


class _Waiting:
    """``probe``'s ``again`` for a waiting sweep (``prune``), asked each time it finds a run's
    lock held, which it decides from the holders ``/proc/locks`` shows then
    (``sweep_mark.other_holder``): the run's runner (or one it cannot tell) ends the wait, the
    run live; a process other than the runner (a sweep at work on the dead run: every run sweeps
    its parents on its way in, so on a busy host a ``prune`` may find one holding the run it came
    for) is waited for, within the one bound of all a sweep's waits (``reaped.wait_until``),
    however many there are; none shown (the lock let go between the attempt and the read) is
    tried again at once, and a second time none is shown is a holder this /proc does not show
    (a runner in another pid namespace): live. Decided on each attempt, so a holder that lets go
    at any moment never has the run taken for live. ``holder``: the last other process seen."""

    def __init__(self, reaped: Reaped, token: str) -> None:
        self.reaped = reaped
        self.token = token
        self.holder: int | None = None
        self.unseen = False
        self.asked = False  # whether the lock was ever found held

    def __call__(self, fd: int) -> bool:
        self.asked = True
        from .sweep_mark import other_holder  # a waiting sweep's, and only where a lock is held

        holder = other_holder(os.fstat(fd), self.token)
        if holder == 0:
            self.unseen = not self.unseen
            return self.unseen
        self.unseen = False
        if holder is None:
            return False
        self.holder = holder
        if time.monotonic() > self.reaped.waits_until():
            return False
        time.sleep(SWEEP_WAIT_PAUSE_SECONDS)
        return True


def parents() -> list[str]:
    """Every directory this process's run groups are made in: the cgroup v2 parent and the
    groups of the v1 hierarchies (for capped runs)."""
    from . import cgroup_v1, cgroup_v2

    found = [cgroup_v2.find_parent()] + list(cgroup_v1.own_groups().values())
    return [path for path in found if path is not None]
