"""Ending and removing what runners that died abruptly (SIGKILL, the OOM killer, a crash) left
behind: the members of their runs' groups, the groups, and the runs' directories.

Facts about deciding that a runner is dead, and what may then be ended:
- The only evidence is the lock in the run's directory (a real, private directory; its owner
  must own whatever is ended in its name) (``processkit.rundir``, ``processkit.liveness``):
  a dead process cannot hold a flock, and a live runner in any pid namespace that shares the
  file system is seen holding it. A pid is no evidence (it may be reused, or belong to a pid
  namespace this /proc does not show), nor is a missing registry entry (another registry may
  hold the run). Held: nothing of the run is touched. Free: the sweep keeps it held while it
  works, and a runner never takes an old lock again. Missing or unreadable: left and reported,
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

Runs sweep their own parent on the way in, ending at most CREATE_ATTEMPTS dead runs and not
waiting for killed members to exit (the next sweep removes such a group); ``prune`` sweeps every
parent and every run directory, and waits.
"""

from __future__ import annotations

import os
import stat
import time

from .. import mountinfo
from .. import rundir
from .. import signum as signals
from ..liveness import Health, probe
from . import cgroupfs
from .cgroupfs import RUN_PREFIX, group_name
from .members import all_pids, read_member

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Iterable

PREFIX = "processkit-"
CREATE_ATTEMPTS = 32
V1_KILL_ROUNDS = 100
V1_KILL_PAUSE_SECONDS = 0.01
YOUNG_DIR_SECONDS = 5.0  # a run directory with no lock yet may be one a runner is making


class Reaped:
    """What a sweep ended and removed (or, dry, would), and what it had to leave, and why.
    (A plain class: every run builds one on its way in, and dataclasses costs start-up.)"""

    def __init__(self) -> None:
        self.processes = 0
        self.groups: list[str] = []
        self.process_groups: list[int] = []
        self.run_dirs: list[str] = []
        self.left: list[dict] = []

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
        or not all(ch in "0123456789abcdef" for ch in parts[-1])
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
) -> None:
    """End and remove the runs whose groups are under ``where`` (with ``groups``) and those of
    ``run_dirs``, whose runner is dead. ``attempts`` bounds how many dead runs (and older-form groups) are
    taken on. ``vouched`` run directories are ones a stale registry entry names: an older
    version's, with no lock of their own, go on that evidence. Best effort: a parent that cannot
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
        if _reap_run(token, group, all_parents, reaped, dry_run, wait, vouched, homes) and attempts is not None:
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
) -> bool:
    """End what the run ``token`` left, if its runner is proven dead; whether it was."""
    path, owner = rundir.locate(token, homes)
    if owner is None:
        if group is not None or os.path.lexists(path):
            reaped.leave(group or path, "no private run directory speaks for it")
        return False
    health, held = probe(path, rundir.LOCK_NAME, hold=True)
    if health is Health.LIVE:
        return False
    from ..rundir_records import job_files, read_groups, read_process_group  # a dead run's records: read only here

    if held is None:
        emptied = health is Health.STALE and bool(read_groups(path))
        if emptied or (health is Health.STALE and path in vouched and group is None):
            # An older version's directory, its entry stale; or one an older sweeper emptied
            # after taking its lock (it removes the lock, not the group record this version
            # writes after the lock and removes before it): the recorded groups go first.
            if _end_groups(token, path, parents, owner, reaped, dry_run, wait) and (dry_run or rundir.remove(path)):
                reaped.run_dirs.append(path)
            return True
        if health is Health.UNPROBED:
            reaped.leave(group or path, "its run directory's lock cannot be probed")
        elif group is not None or _older_than(path, YOUNG_DIR_SECONDS):
            reaped.leave(group or path, "no liveness lock speaks for it")
        return False
    try:
        ended = _end_groups(token, path, parents, owner, reaped, dry_run, wait)
        for name in [rundir.PGROUP_NAME, *job_files(path, "." + rundir.PGROUP_NAME)]:
            identity = read_process_group(path, name)
            if identity is not None:
                ended = _end_process_group(identity, owner, reaped, dry_run, wait) and ended
        if ended and (dry_run or rundir.remove(path)):
            reaped.run_dirs.append(path)
    finally:
        os.close(held)
    return True


def _end_groups(token: str, path: str, parents, owner: int, reaped: Reaped, dry_run: bool, wait: bool) -> bool:
    """End the run's groups, in every parent this process makes groups in and wherever its
    directory records them; whether all are gone."""
    ended = True
    candidates = [os.path.join(parent, group_name(token)) for parent in parents()]
    candidates += [group for parent in parents() for group in _job_groups(parent, token)]
    for candidate in dict.fromkeys(candidates + recorded_groups(path, token)):
        if _is_real_dir(candidate):
            ended = _end_group(candidate, owner, reaped, dry_run, wait) and ended
    return ended


def _job_groups(parent: str, token: str) -> list[str]:
    """The groups of a batch's jobs under ``parent`` (``<group name>.j<seq>``)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    prefix = group_name(token) + rundir.JOB_SEPARATOR
    return [os.path.join(parent, name) for name in names if name.startswith(prefix) and _names_run(name, token)]


def _names_run(name: str, token: str) -> bool:
    """Whether a group's name is the run's, or one of its batch's jobs'."""
    return name.startswith(RUN_PREFIX) and rundir.group_token(name[len(RUN_PREFIX) :]) == token


def recorded_groups(path: str, token: str) -> list[str]:
    """The groups the run's directory records (``rundir.record_groups``, a batch job's too) that
    may be its own: named after its token, inside a mounted cgroup hierarchy (so a file there is
    the kernel's, not one a user wrote); what else a record says is ignored."""
    from ..rundir_records import job_files, read_groups

    listed = [
        group
        for name in [rundir.GROUPS_NAME, *job_files(path, "." + rundir.GROUPS_NAME)]
        for group in read_groups(path, name)
    ]
    if not listed:
        return []
    try:
        roots = [m.mount_point.rstrip("/") + "/" for m in mountinfo.mounts() if m.fstype in ("cgroup", "cgroup2")]
    except OSError:
        return []
    return [
        group
        for group in listed
        if os.path.isabs(group)
        and _names_run(os.path.basename(group), token)
        and os.path.normpath(group) == group
        and any(group.startswith(root) for root in roots)
    ]


def _older_than(path: str, seconds: float) -> bool:
    try:
        return os.lstat(path).st_mtime < time.time() - seconds
    except OSError:
        return False


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _end_group(group: str, owner: int, reaped: Reaped, dry_run: bool, wait: bool) -> bool:
    """Kill every member of a dead run's group and remove it; whether it is gone."""
    if os.lstat(group).st_uid != owner:
        reaped.leave(group, "its owner is not the run directory's")
        return False
    try:
        reaped.processes += len(cgroupfs.subtree_pids(group))
    except (OSError, ValueError):
        pass
    if dry_run:
        reaped.groups.append(group)
        return True
    kill = os.path.join(group, "cgroup.kill")
    if os.path.exists(kill):  # the members of every group below it too
        try:
            cgroupfs.write_text(kill, "1")
        except OSError:
            pass
    else:  # a v1 group, or a kernel before 5.14
        _kill_members(group)
    if not cgroupfs.remove_group(group, cgroupfs.RMDIR_ATTEMPTS if wait else 1):
        reaped.leave(group, "members remain (not yet exited, or out of reach)")
        return False
    reaped.groups.append(group)
    return True


def _kill_members(group: str) -> None:
    """SIGKILL the members (of the groups below it too) round by round, so one forked
    meanwhile is killed in the next."""
    for _ in range(V1_KILL_ROUNDS):
        try:
            pids = cgroupfs.subtree_pids(group)
        except (OSError, ValueError):
            return
        live = [pid for pid in pids if (member := read_member(pid)) is not None and not member.zombie]
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, signals.SIGKILL)
            except OSError:
                pass
        time.sleep(V1_KILL_PAUSE_SECONDS)


def _end_process_group(identity: tuple[int, str, int], owner: int, reaped: Reaped, dry_run: bool, wait: bool) -> bool:
    """Kill a dead run's process group if it is provably the run's (see the facts above)."""
    pgid, leader_start, session = identity
    leader = read_member(pgid)
    if leader is not None and leader.start_time != leader_start:
        return True  # the id was handed on: the run's group ended long ago
    group = _live_members(pgid)
    if not group:
        return True
    if leader is None and not all(_after_leader(m, leader_start, session) for m in group):
        reaped.leave(f"process group {pgid}", "cannot show it is the run's group")
        return False
    if not all(_owned_by(m.pid, owner) for m in group):
        reaped.leave(f"process group {pgid}", "a member's owner is not the run directory's")
        return False
    reaped.processes += len(group)
    reaped.process_groups.append(pgid)
    if dry_run:
        return True
    for _ in range(V1_KILL_ROUNDS if wait else 1):
        try:
            os.killpg(pgid, signals.SIGKILL)
        except ProcessLookupError:
            return True
        except OSError as exc:
            reaped.leave(f"process group {pgid}", f"cannot signal it: {exc.strerror}")
            return False
        if not wait:
            return True
        time.sleep(V1_KILL_PAUSE_SECONDS)
        if not _live_members(pgid):
            return True
    reaped.leave(f"process group {pgid}", "members remain (not yet exited)")
    return False


def _live_members(pgid: int) -> list:
    """The group's members that have not exited (a zombie holds the id, but runs nothing)."""
    found = (read_member(pid) for pid in all_pids())
    return [member for member in found if member is not None and member.pgid == pgid and not member.zombie]


def _owned_by(pid: int, owner: int) -> bool:
    try:
        return os.stat(f"/proc/{pid}").st_uid == owner
    except OSError:
        return True  # gone meanwhile: nothing to signal, nothing to protect


def _after_leader(member, leader_start: str, session: int) -> bool:
    return member.session == session and member.start_time is not None and int(member.start_time) >= int(leader_start)


def parents() -> list[str]:
    """Every directory this process's run groups are made in: the cgroup v2 parent and the
    groups of the v1 hierarchies (for capped runs)."""
    from . import cgroup_v1, cgroup_v2

    found = [cgroup_v2.find_parent()] + list(cgroup_v1.own_groups().values())
    return [path for path in found if path is not None]
