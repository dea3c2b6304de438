"""The cgroups a lodged host (a batch, a bench session, the API's service) reuses from run to
run: groups whose every figure a run reads can be started again exactly are kept idle between
runs instead of being made and removed for each (a cgroup ``mkdir`` and ``rmdir`` each takes the
kernel's global cgroup lock, and costs CPU a run would otherwise pay every time).

Facts that decide what may be reused, and when:
- A group is taken again only when it is empty: no process in it or below it (``cgroup.procs``
  or ``tasks`` empty, a v1 ``tasks`` opened afresh each time: ``cgroupfs.v1_has_members``; for
  pids ``pids.current`` 0, which still counts an unreaped zombie) and no group below it (a
  cgroupfs directory's link count is 2 plus its subdirectories). So a reused group never
  carries another run's process. What fails the check is removed, and a fresh
  group made in its place.
- cpuacct: writing 0 to ``cpuacct.usage`` zeroes the usage and its user/system split on every
  CPU: the group starts as a fresh one does.
- pids: ``pids.peak`` cannot be reset. A group whose peak is 1 is reused: a run's root joins it
  before its exec, so the run's own peak is at least 1, and what the group reads after the run
  (1, or the higher peak the run reached) is the run's own. A group that saw more is removed.
- memory (v1): writing 0 to ``memory.max_usage_in_bytes`` restarts the peak from the group's
  present charge, and an emptied group still holds some for a while: what its last tasks'
  kernel memory gave back stays in a per-CPU stock charged to the group until another group
  charges on that CPU, and part of that memory is freed only after an RCU grace period (for
  ``true``, 50-500 KiB, gone within about 0.2 s); page cache the run left (a file on a tmpfs)
  stays charged as long as it lives. So a memory group is taken again only once the peak read
  back after the restart is 0: the charge was 0 when it restarted, and with no task in the
  group and nothing of it swapped out (``memory.memsw.usage_in_bytes`` 0, where the kernel
  counts swap) nothing can charge it again before the next run's first task, so its peak
  counts from 0 as a fresh group's does. Its ``oom_control`` (the OOM kill count, the OOM
  killer's switch) and ``limit_in_bytes`` must read as when the group was made (a run's
  process may write its own group's files). The idle groups are tried oldest first, one at a
  time, and one still charged goes behind the others, unless they are at their bound. So more of
  them are idle than runs are in flight: an idle memory group keeps its four files open only
  while the open-file limit leaves room for them beside the jobs in flight
  (``fdlimit.spare_descriptors``; a try at a group still charged is then a few ``pread``s, not
  four ``open``s and ``close``s), else holds none and opens them when it is started again. Its
  ``tasks`` fd, which lists its members only when opened afresh, is never held while idle.
- cgroup v2: a child cloned into a group (``CLONE_INTO_CGROUP``) whose ``cgroup.kill`` was ever
  written is killed at birth (Linux 6.18 compares the group's kill count with the one the clone
  began with), so a lent group's teardown writes it only when something is left to kill (its
  ``cgroup.events`` says ``populated 1``), and a group it was written to is never lent again.
  It is reused only while the group has none of the memory, pids or io controllers (its
  ``cgroup.controllers``: peaks that cannot be reset, I/O counters that only grow); when a
  run's CPU figures come from its ``cpu.stat``, they are read as a difference from its value
  at reuse.
- The groups are named as a batch job's are (``<batch token>.j<seq>``, ``rundir.group_token``,
  from a sequence of their own past any job's), so the host's lock speaks for them while they
  live, and a v1 group is recorded in the host's directory (``j<seq>.groups``) as a job's are:
  a SIGKILLed host's idle groups are swept with its jobs'. ``close`` removes them before the
  directory goes.
"""

from __future__ import annotations

import itertools
import os

from .. import fdlimit
from ..rundir import JobSlot, RunDir
from . import cgroupfs

V2 = ("cgroup2",)  # the controllers key of a cgroup v2 group: its own kind, joined through cgroup.procs
HELD = "groups"  # the pool's name in its directory's ``holds``
POOL_SEQ = 1 << 32  # the pool's group names follow a sequence no job's eight hex digits reach
NOT_RESTARTED = frozenset(("memory", "pids", "io"))  # v2 controllers whose counters cannot start again
MAX_IDLE = 64  # idle groups kept per parent, past which a given-back group is removed
IDLE_FILES = 4  # what an idle memory group may keep open: oom_control, limit, peak, swap


class Pooled:
    """One group a pool lends: its path, the fd its joiner writes (``tasks``, or v2's
    ``cgroup.procs``; -1 for an idle memory group), a directory fd (v2: the child is cloned
    into it; -1 elsewhere), the pool's fd on its parent its files are opened through (None
    where it has none), and whether it served a run before this one (``reused``)."""

    __slots__ = (
        "parent",
        "parent_fd",
        "path",
        "join_fd",
        "dir_fd",
        "controllers",
        "slot",
        "reused",
        "killed",
        "files",
        "settings",
        "idle_files",
    )

    def __init__(
        self,
        parent: str,
        parent_fd: int | None,
        path: str,
        join_fd: int,
        dir_fd: int,
        controllers: tuple[str, ...],
        slot: JobSlot,
    ):
        self.parent = parent
        self.parent_fd = parent_fd
        self.path = path
        self.join_fd = join_fd
        self.dir_fd = dir_fd
        self.controllers = controllers
        self.slot = slot
        self.reused = False
        self.killed = False  # its cgroup.kill was written: never lent again
        self.files = cgroupfs.HeldFiles(path, parent_fd)  # what is read of it run after run
        self.settings: bytes | None = None  # a memory group's, as made (``_memory_settings``)
        self.idle_files = 0  # the files it keeps open while idle, counted in its pool's room
        if "memory" in controllers:  # lent at once: its files stay open for its run
            self.settings = _memory_settings(self.files)


def of(rundir: RunDir | None) -> Pool | None:
    """The pool of the lodged host whose job slot ``rundir`` is, made on first use; None for a
    run with a directory of its own (one run a process: nothing to reuse)."""
    home = getattr(rundir, "home", None)
    if home is None:
        return None
    pool = home.holds.get(HELD)
    if pool is None:
        pool = home.holds[HELD] = Pool(home, fdlimit.spare_descriptors())
    assert isinstance(pool, Pool)
    return pool


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
        self._sequence = itertools.count(POOL_SEQ)
        self._closed = False

    def take(self, parent: str, controllers: tuple[str, ...]) -> Pooled:
        """An empty group under ``parent`` with its counters started again, else a fresh one;
        raises OSError when none can be made."""
        self._kinds[parent] = controllers
        group = self._ready.pop(parent, None)
        if group is not None and not _empty(group):  # joined since it was started again: not lent
            remove(group)
            group = None
        if group is None:
            group = self._restart_one(self._idle.get(parent, []), controllers, ahead=False)
        return group if group is not None else self._fresh(parent, controllers)

    def _fresh(self, parent: str, controllers: tuple[str, ...]) -> Pooled:
        slot = JobSlot(self._home, next(self._sequence))
        path = os.path.join(parent, cgroupfs.group_name(slot.token))
        join_fd = cgroupfs.make_group(path, "cgroup.procs" if controllers == V2 else "tasks")
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

    def give(self, group: Pooled) -> None:
        """A run is done with ``group``: kept idle for the next (checked when taken), or removed
        once the pool is closed or full."""
        idle = self._idle.setdefault(group.parent, [])
        if self._closed or group.killed or len(idle) >= MAX_IDLE:
            remove(group)
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
            restarted = _restarted(group, ahead)
            if restarted:
                group.reused = True
                return group
            if restarted is None and len(idle) < MAX_IDLE - 1:
                self._hold_or_close(group)
                idle.append(group)
                return None
            remove(group)
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
        for parent, controllers in self._kinds.items():
            idle = self._idle.get(parent)
            if idle and parent not in self._ready:
                group = self._restart_one(idle, controllers, ahead=True)
                if group is not None:
                    self._ready[parent] = group

    def close(self) -> None:
        """Remove every idle group (the host's runs are over); a group given back later goes at once."""
        self._closed = True
        for idle in (*self._idle.values(), list(self._ready.values())):
            while idle:
                remove(idle.pop())
        self._idle_files = 0
        self._ready.clear()
        for fd in self._parent_fds.values():
            if fd is not None:
                os.close(fd)
        self._parent_fds.clear()


def _empty(group: Pooled) -> bool:
    """No task in ``group`` now: what a group started again ahead must still be when it is taken."""
    files = group.files
    try:
        if group.controllers == V2:
            return not files.content("cgroup.procs").strip()
        if "pids" in group.controllers:
            return files.number("pids.current") == 0
        return not cgroupfs.v1_has_members(group.path, group.parent_fd)
    except (OSError, ValueError):
        return False


def _restarted(group: Pooled, ahead: bool) -> bool | None:
    """Whether the group is empty, and so its counters were started again as a fresh group's;
    None for an empty memory group whose charge is not 0 yet (it may be, for a later run).
    ``ahead``: its members are not read now (but through the memory group's fresh join fd), as
    ``take`` reads them afresh when it lends it (a group holding a task then is removed: zeroing
    its usage harmed nothing)."""
    files = group.files
    controllers = group.controllers
    try:
        facts = _stat(group)
        if facts.st_nlink != 2:  # a group below it
            return False
        if controllers == V2:
            counting = NOT_RESTARTED.intersection(files.text("cgroup.controllers").split())
            return not counting and (ahead or not files.content("cgroup.procs").strip())
        if "pids" in controllers:
            if (not ahead and files.number("pids.current") != 0) or files.number("pids.peak") > 1:
                return False
        if "memory" in controllers:  # its tasks are read by the fd it is joined through
            return _memory_restarted(group, "cpuacct" in controllers)
        if "cpuacct" in controllers:
            if not ahead and cgroupfs.v1_has_members(group.path, group.parent_fd):
                return False
            files.write("cpuacct.usage", "0")
    except (OSError, ValueError):
        return False
    return True


def _stat(group: Pooled) -> os.stat_result:
    """The group directory's facts, through the shortest walk there is (``cgroupfs.open_in``)."""
    if group.dir_fd >= 0:
        return os.fstat(group.dir_fd)
    if group.parent_fd is not None:
        return os.stat(group.path.rpartition("/")[2], dir_fd=group.parent_fd)
    return os.stat(group.path)


def _memory_restarted(group: Pooled, cpuacct: bool) -> bool | None:
    """``_restarted`` for a memory group (``cpuacct``: that hierarchy's too), whose ``tasks`` fd
    its run's child joins through is opened here (afresh: it lists the members then) and kept
    only when the group is lent; its files stay open either way (the pool closes them, or
    keeps them while it is idle); raises OSError."""
    files = group.files
    join_fd = cgroupfs.open_members(group.path, parent_fd=group.parent_fd)
    try:
        if os.pread(join_fd, 1, 0) or group.settings is None or _memory_settings(files) != group.settings:
            return False
        if cpuacct:
            files.write("cpuacct.usage", "0")
        files.write("memory.max_usage_in_bytes", "0")  # the peak restarts from the present charge
        if files.number("memory.max_usage_in_bytes") != 0 or _swapped(files):
            return None
        group.join_fd, join_fd = join_fd, -1
        return True
    finally:
        if join_fd >= 0:  # not lent
            os.close(join_fd)


def _memory_settings(files: cgroupfs.HeldFiles) -> bytes | None:
    """What a memory group's run must find as a fresh group has it: its OOM kill count, the OOM
    killer's switch (``oom_control``) and its limit; None when unreadable (never lent again)."""
    try:
        return files.content("memory.oom_control") + files.content("memory.limit_in_bytes")
    except OSError:
        return None


def _swapped(files: cgroupfs.HeldFiles) -> bool:
    """Whether swap holds something charged to the group (which a swap-in would charge again);
    a kernel that does not count swap per group charges a swap-in to the task that faults."""
    try:
        return files.number("memory.memsw.usage_in_bytes") != 0
    except FileNotFoundError:
        return False


def remove(group: Pooled) -> None:
    """Remove the group (its fds first), then its record once it is gone."""
    if group.join_fd >= 0:
        os.close(group.join_fd)
    group.files.close()
    if group.dir_fd >= 0:
        os.close(group.dir_fd)
    if group.controllers == V2:
        cgroupfs.remove_group(group.path)
    else:
        cgroupfs.remove_v1_group(group.path)
    if not os.path.lexists(group.path):
        group.slot.close()
