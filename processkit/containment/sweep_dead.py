"""What a sweep does to a run whose runner is dead (containment/sweep.py, whose facts it keeps):
end its groups, where its directory records them too, and its recorded process groups, then
remove its directory. A module of its own because a run's sweep on its way in almost never
meets a dead run: this code stays out of the run's start-up (its bundle's unmarshal).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time

from .. import mountinfo
from .. import rundir
from .. import signum as signals
from ..errors import os_error_words
from ..liveness import Health
from . import cgroupfs
from .cgroupfs import RUN_PREFIX, group_name
from .members import all_pids, kill_ended_alone, read_member, signal_listed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

V1_KILL_ROUNDS = 100
V1_KILL_PAUSE_SECONDS = 0.01
YOUNG_DIR_SECONDS = 5.0  # a run directory with no lock yet may be one a runner is making


def end_run(
    token: str,
    group: str | None,
    path: str,
    owner: int,
    health: Health,
    held: int | None,
    parents: Callable[[], list[str]],
    reaped,
    dry_run: bool,
    wait: bool,
    vouched: frozenset,
) -> bool:
    """End what the run ``token`` left, its runner not live by its lock (``health``; ``held``:
    the lock, now held here, when it was free); whether it was proven dead. ``reaped`` is the
    sweep's ``sweep.Reaped`` (not imported here: that would be a cycle)."""
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
            if group is None and _only_marks(path):
                # Its tree ended and its lock removed by an earlier version's sweep, which knows
                # no ``dead`` mark and so could not remove the directory: its recorded groups (none
                # expected) ended first, as the evidence is never removed before what it speaks for.
                ended = _end_groups(token, path, parents, owner, reaped, dry_run, wait)
                if ended and (dry_run or rundir.remove(path)):
                    reaped.run_dirs.append(path)
                return True
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


def _end_groups(token: str, path: str, parents, owner: int, reaped, dry_run: bool, wait: bool) -> bool:
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


def _only_marks(path: str) -> bool:
    """Whether the directory holds a sweep's marks (an older version's ``sweeping`` among them) and nothing else."""
    try:
        names = set(os.listdir(path))
    except OSError:
        return False
    return bool(names) and names <= {rundir.DEAD_NAME, rundir.SWEEPING_NAME}


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _end_group(group: str, owner: int, reaped, dry_run: bool, wait: bool) -> bool:
    """Kill every member of a dead run's group and remove it; whether it is gone."""
    if os.lstat(group).st_uid != owner:
        reaped.leave(group, "its owner is not the run directory's")
        return False
    try:
        reaped.pids.update(_reachable(group))
    except (OSError, ValueError):
        pass
    if dry_run:
        reaped.groups.append(group)
        return True
    kill = os.path.join(group, "cgroup.kill")
    if os.path.exists(kill):  # the members of every group below it too
        try:
            cgroupfs.write_text(kill, "1")
            ended = _reachable(group)  # what cgroup.kill misses, its main thread not listed
            kill_ended_alone(ended, set(_reachable(group, "cgroup.threads")))
        except (OSError, ValueError):
            pass
    else:  # a v1 group, or a kernel before 5.14
        _kill_members(group)
    unread = None  # why its members could not be looked at, if they could not
    if wait:  # ``prune``: its members' exits waited for, within the sweep's one bound
        try:
            cgroupfs.emptied(group, reaped.waits_until())
        except OSError as exc:
            unread = exc
    if not cgroupfs.remove_group(group, cgroupfs.RMDIR_ATTEMPTS if wait else 1):
        remain = "members remain (not yet exited, or out of reach)"
        reaped.leave(group, remain if unread is None else f"its members could not be read: {os_error_words(unread)}")
        return False
    reaped.groups.append(group)
    return True


def _reachable(group: str, name: str = "cgroup.procs") -> list[int]:
    """The ids a group and those below it list, a group below that cannot be read passed over:
    what can be killed is killed, the rest left (``remove_group`` then fails and says so)."""
    return cgroupfs.subtree_ids(group, name, skip_unreadable=True)


def _kill_members(group: str) -> None:
    """SIGKILL the members (of the groups below it too) round by round, so one forked
    meanwhile is killed in the next."""
    for _ in range(V1_KILL_ROUNDS):
        try:
            pids = _reachable(group)
        except (OSError, ValueError):
            return
        live = [pid for pid in pids if (member := read_member(pid)) is not None and not member.zombie]
        if not live:
            return
        # each pinned, and killed while the group still lists it: its pid handed on outside it is not
        with contextlib.suppress(OSError, ValueError):  # out of reach, or the group unreadable: the next round sees
            signal_listed(live, signals.SIGKILL, lambda: _reachable(group))
        time.sleep(V1_KILL_PAUSE_SECONDS)


def _end_process_group(identity: tuple[int, str, int], owner: int, reaped, dry_run: bool, wait: bool) -> bool:
    """Kill a dead run's process group if it is provably the run's (the facts in ``sweep``'s preamble)."""
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
    reaped.pids.update(member.pid for member in group)
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
