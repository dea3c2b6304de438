"""The cgroups a lodged host (a batch, a bench session, the API's service) reuses from run to
run: groups whose every figure a run reads can be started again exactly are kept idle between
runs instead of being made and removed for each (a cgroup ``mkdir`` and ``rmdir`` each takes the
kernel's global cgroup lock, and costs CPU a run would otherwise pay every time).

What decides whether a group is lent again, and the facts behind it: ``lent``. A group that
cannot be is removed (the groups below it first) without waiting on the loop: one whose last
members are still exiting is tried again on the pool's next ``take`` (``Pool._remove``).

The groups are named as a batch job's are (``<batch token>.j<seq>``, ``rundir.group_token``,
from a sequence of their own past any job's), so the host's lock speaks for them while they
live, and a v1 group is recorded in the host's directory (``j<seq>.groups``) as a job's are:
a SIGKILLed host's idle groups are swept with its jobs'. ``close`` removes them before the
directory goes.
"""

from __future__ import annotations

import os

from .. import fdlimit
from ..plain import counter
from ..rundir import JobSlot, RunDir
from . import cgroupfs
from .lent import IDLE_FILES, V2, Pooled, empty, parkable, remove, restarted

HELD = "groups"  # the pool's name in its directory's ``holds``
POOL_SEQ = 1 << 32  # the pool's group names follow a sequence no job's eight hex digits reach
MAX_IDLE = 64  # idle groups kept per parent, past which a given-back group is removed


def of(rundir: RunDir | None) -> Pool | None:
    """The pool of the lodged host whose job slot ``rundir`` is, made on first use; None for a
    run with a directory of its own (one run a process: nothing to reuse)."""
    home = getattr(rundir, "home", None)
    if home is None:
        return None
    pool = home.holds.get(HELD)
    if pool is None:
        pool = home.holds[HELD] = Pool(home, fdlimit.spare_descriptors())
        home.speaks_for(pool)  # the directory stays while a group of the pool's remains
    assert isinstance(pool, Pool)
    return pool


def held_by(home: RunDir) -> Pool | None:
    """The pool a lodged host's directory holds, once a run of it has taken a group; else None."""
    pool = home.holds.get(HELD)
    return pool if isinstance(pool, Pool) else None


class Pool:
    """A lodged host's idle groups, by parent directory. ``idle_file_room``: how many files its
    idle memory groups may keep open (``fdlimit.spare_descriptors``; none by default)."""

    def __init__(self, home: RunDir, idle_file_room: int = 0) -> None:
        self._home = home
        self._idle_file_room = min(idle_file_room, MAX_IDLE * IDLE_FILES)
        self._idle_files = 0  # what its idle memory groups keep open now
        self._idle: dict[str, list[Pooled]] = {}
        self._ready: dict[str, Pooled] = {}  # a group per parent already started again (``restart_ahead``)
        self._kinds: dict[str, tuple[str, ...]] = {}  # each parent taken from, and its controllers
        self._parent_fds: dict[str, int | None] = {}  # a directory fd on each parent (``cgroupfs.open_in``)
        self._busy: list[Pooled] = []  # groups whose removal waits on their last members' exit (``_remove``)
        self._sequence = counter(POOL_SEQ)
        self._closed = False
        self._made: dict[str, None] = {}  # every group it made that is not removed yet (``remaining``)
        self._given: list[Pooled] = []  # given back, not looked at yet (``settle_later``)
        self._later = False

    def take(self, parent: str, controllers: tuple[str, ...]) -> Pooled:
        """An empty group under ``parent`` with its counters started again, else a fresh one;
        raises OSError when none can be made."""
        self._kinds[parent] = controllers
        if self._given:
            self._settle()
        if self._busy:
            self._remove_busy()
        group = self._ready.pop(parent, None)
        if group is not None and not empty(group):  # joined since it was started again: not lent
            self._remove(group)
            group = None
        if group is None:
            group = self._restart_one(self._idle.get(parent, []), controllers, ahead=False)
        return group if group is not None else self._fresh(parent, controllers)

    def _fresh(self, parent: str, controllers: tuple[str, ...]) -> Pooled:
        slot = JobSlot(self._home, next(self._sequence))
        path = os.path.join(parent, cgroupfs.group_name(slot.token))
        join_fd = cgroupfs.make_group(path, "cgroup.procs" if controllers == V2 else "tasks")
        self._made[path] = None
        dir_fd = -1
        if controllers == V2:
            try:
                dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                pass  # the child then joins through cgroup.procs alone
        else:
            slot.record_groups([path])
        return Pooled(parent, self._parent_fd(parent), path, join_fd, dir_fd, controllers, slot)

    def _parent_fd(self, parent: str) -> int | None:
        """The pool's directory fd on ``parent``, opened once; None where it cannot be (each
        file is then opened by its whole path)."""
        if parent not in self._parent_fds:
            try:
                self._parent_fds[parent] = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                self._parent_fds[parent] = None
        return self._parent_fds[parent]

    def settle_later(self) -> None:
        """From now on, a group given back is looked at (``_park``) only by the pool's next
        ``restart_ahead``, ``take`` or ``close``: for a host that calls ``restart_ahead`` once
        each run's outcome has gone out (the API's service, after its reply), so a run's
        release, which its caller waits through, only hands its groups over. Nothing is lent
        before it is looked at: every way to a lend goes through ``_settle`` first."""
        self._later = True

    def give(self, group: Pooled) -> None:
        """A run is done with ``group``: ``_park``, at once or (``settle_later``) later."""
        if self._later and not self._closed:
            self._given.append(group)
        else:
            self._park(group)

    def _settle(self) -> None:
        given, self._given = self._given, []
        for group in given:
            try:
                self._park(group)
            except OSError:  # (as a release's failed step would have been) removed, later if need be
                self._busy.append(group)

    def _park(self, group: Pooled) -> None:
        """A given-back group kept idle for the next run (checked when taken), or removed once
        the pool is closed or full, and at once where it cannot be lent again: a group below it
        (a run's process made it), or v2 controllers whose counters do not start again (on a
        pure cgroup v2 host, the default accounting's)."""
        idle = self._idle.setdefault(group.parent, [])
        if self._closed or group.killed or len(idle) >= MAX_IDLE or not parkable(group):
            self._remove(group)
            return
        if "memory" in group.controllers:  # idle for longer than a run: its tasks fd goes
            os.close(group.join_fd)
            group.join_fd = -1
            self._hold_or_close(group)
        idle.append(group)

    def _hold_or_close(self, group: Pooled) -> None:
        """An idle memory group's files kept open while the pool's room holds them, else closed."""
        count = group.files.count
        if self._idle_files + count <= self._idle_file_room:
            self._idle_files += count
            group.idle_files = count
        else:
            group.files.close()

    def _restart_one(self, idle: list[Pooled], controllers: tuple[str, ...], ahead: bool) -> Pooled | None:
        """The first of ``idle`` (memory groups: the longest idle, which has had the most time to
        drain) whose counters start again, taken out; one that cannot is removed, and a memory
        group still charged goes behind the others for a later try (then None), unless they are
        at their bound. ``ahead``: for ``restart_ahead``, whose group ``take`` checks empty when
        it lends it."""
        oldest_first = "memory" in controllers
        while idle:
            group = idle.pop(0 if oldest_first else -1)
            self._idle_files -= group.idle_files
            group.idle_files = 0
            started = restarted(group, ahead)
            if started:
                group.reused = True
                return group
            if started is None and len(idle) < MAX_IDLE - 1:
                self._hold_or_close(group)
                idle.append(group)
                return None
            self._remove(group)
        return None

    def restart_ahead(self) -> None:
        """Start one idle group of each parent taken from again now, for the next run's ``take``:
        called once a run's child is spawned, while its exec runs and the runner would only
        wait, so a run that follows another finds its group ready. That pays where several are
        idle: memory groups, tried oldest first while the last ones used drain. None is made
        ahead where none is idle: runs would then alternate between two sets, each cloning its
        child into a group empty since the run before last, which this kernel makes slower than
        the group the last run just left (bench/README.md). The group's checks are those
        ``take`` makes, made earlier, and ``take`` looks again that the group is empty (one a
        process joined meanwhile is removed, not lent)."""
        if self._given:
            self._settle()
        for parent, controllers in self._kinds.items():
            idle = self._idle.get(parent)
            if idle and parent not in self._ready:
                group = self._restart_one(idle, controllers, ahead=True)
                if group is not None:
                    self._ready[parent] = group

    def _remove(self, group: Pooled) -> None:
        """Remove the group (``remove``) without waiting: one its last members have not left yet
        (killed, still exiting) is tried again on the pool's next ``take``, never slept for on
        the loop the runs share, and waited for (within a bound) only at ``close``."""
        if not remove(group, attempts=1):
            self._busy.append(group)
        else:
            self._made.pop(group.path, None)

    def _remove_busy(self) -> None:
        busy, self._busy = self._busy, []
        for group in busy:
            self._remove(group)

    def remaining(self) -> list[str]:
        """Its groups still on the host: after ``close``, those it could not remove, and any
        still lent (its directory then stays for a sweep: ``rundir.RunDir.close``)."""
        return list(self._made)

    def close(self) -> None:
        """Remove every idle group (the host's runs are over), waiting within a bound for those
        whose last members are still exiting (what stays is the sweep's); a group given back
        later goes at once."""
        self._closed = True
        self._settle()
        for idle in (*self._idle.values(), list(self._ready.values())):
            while idle:
                self._remove(idle.pop())
        busy, self._busy = self._busy, []
        for group in busy:
            if remove(group, attempts=cgroupfs.RMDIR_ATTEMPTS):
                self._made.pop(group.path, None)
        self._idle_files = 0
        self._ready.clear()
        for fd in self._parent_fds.values():
            if fd is not None:
                os.close(fd)
        self._parent_fds.clear()
