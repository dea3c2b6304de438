"""A group a pool lends (``Pooled``, ``pool``), and the checks that decide whether it may be lent
again: taken again only when the next run finds it as a fresh group, else removed.

Facts that decide what may be reused, and when:
- A group is taken again only when it is empty: no process in it or below it (v2: its
  ``cgroup.events`` says ``populated 0``, read with ``frozen 0``, and then its
  ``cgroup.freeze`` says no freeze was asked for: ``_idle_v2``; v1: ``tasks`` empty, opened afresh each time:
  ``cgroupfs.v1_has_members``; for pids ``pids.current`` 0, which still counts an unreaped
  zombie) and no group below it (a cgroupfs directory's link count is 2 plus its
  subdirectories). So a reused group never carries another run's process. What fails the check is removed, and a fresh
  group made in its place. A group below a given-back group (a run's process may make one in
  its own: a delegated v2 group, or any group of a root child's) means it is not kept idle at
  all: it is removed at once, the groups below it first (``cgroupfs.remove_group``).
- Limits and switches: a run's process may write its own group's files (``pids.max``, a memory
  limit, ``cgroup.freeze``), and some counters cannot start again (``pids.events``, the OOM
  kill count in ``memory.oom_control``, ``memory.failcnt``). Those of ``SETTINGS`` must read
  as when the group was made, or it is not lent again: one job can never cap, freeze or
  count for the next (a v2 ``cgroup.freeze`` read by ``_idle_v2``, above). (Read
  through held fds, each for one byte more than it held then: a few short ``pread``s a reuse;
  a memory group's once its charge is 0, not at each try.)
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
  counts from 0 as a fresh group's does. The idle groups are tried oldest first, one at a
  time, and one still charged goes behind the others, unless they are at their bound. So more of
  them are idle than runs are in flight: an idle memory group keeps its files (``IDLE_FILES``) open only
  while the open-file limit leaves room for them beside the jobs in flight
  (``fdlimit.spare_descriptors``; a try at a group still charged is then a few ``pread``s, not
  as many ``open``s and ``close``s), else holds none and opens them when it is started again. Its
  ``tasks`` fd, which lists its members only when opened afresh, is never held while idle, and
  is opened once a lend: when the group is started again at ``take``, or, started ahead, by
  ``empty`` when ``take`` lends it.
- cgroup v2: a child cloned into a group (``CLONE_INTO_CGROUP``) whose ``cgroup.kill`` was ever
  written is killed at birth (Linux 6.18 compares the group's kill count with the one the clone
  began with), so a lent group's teardown writes it only when something is left to kill (its
  ``cgroup.events`` says ``populated 1``), and a group it was written to is never lent again.
  It is reused only while the group has none of the memory, pids or io controllers (its
  ``cgroup.controllers``: peaks that cannot be reset, I/O counters that only grow); a group
  that has one (a pure cgroup v2 host, whose runs' parent the default accounting gives them)
  is not kept idle but removed when its run gives it back, so the pool there only makes and
  removes, as a host without one does, never waiting on the loop for it; when a
  run's CPU figures come from its ``cpu.stat``, they are read as a difference from its value
  at reuse.
"""

from __future__ import annotations

import os

from ..rundir import JobSlot
from . import cgroupfs
from .stragglers import remove_v1_group

V2 = ("cgroup2",)  # the controllers key of a cgroup v2 group: its own kind, joined through cgroup.procs
NOT_RESTARTED = frozenset(("memory", "pids", "io"))  # v2 controllers whose counters cannot start again
# The files of a group a run's process may write (its own group's limits and switches) and the
# counters that cannot start again, by controller: a group is lent again only while they read
# as when it was made (``_as_made``). A file this kernel does not have is left out.
SETTINGS = {
    # (``cgroup.freeze`` is read after ``cgroup.events``, which says its members: ``_idle_v2``.)
    "cgroup2": ("cgroup.max.depth", "cgroup.max.descendants", "cgroup.type", "cgroup.subtree_control"),
    "memory": (
        "memory.oom_control",
        "memory.limit_in_bytes",
        "memory.soft_limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.kmem.tcp.limit_in_bytes",
        "memory.failcnt",
        "memory.swappiness",
    ),
    "pids": ("pids.max", "pids.events"),
    "cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares", "cpu.stat"),
}
IDLE_FILES = 3 + len(SETTINGS["memory"])  # what an idle memory group may keep open: its settings, peak, swap, directory


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
        "setting_files",
        "settings",
        "idle_files",
        "counting",
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
        # Its settings files and their content as made (lent at once: its files stay open for its run).
        self.setting_files, self.settings = _present(self.files, [n for c in controllers for n in SETTINGS.get(c, ())])
        self.idle_files = 0  # the files it keeps open while idle, counted in its pool's room
        # A v2 group with a controller whose counters cannot start again, as made: never kept
        # idle (``parkable``, read once here; ``restarted`` reads them again at each lend).
        self.counting = controllers == V2 and _counting(self.files)


def empty(group: Pooled) -> bool:
    """No task in ``group`` now: what a group started again ahead must still be when it is taken."""
    files = group.files
    try:
        if group.controllers == V2:
            return _idle_v2(files)
        if "memory" in group.controllers and group.join_fd < 0:  # started ahead: no join fd yet
            # Its tasks opened now, afresh, list its members: the fd its run's child joins by.
            group.join_fd = cgroupfs.open_members(group.path, parent_fd=group.parent_fd)
            if "pids" not in group.controllers:
                return not os.pread(group.join_fd, 1, 0)
        if "pids" in group.controllers:
            return files.number("pids.current") == 0
        return not cgroupfs.v1_has_members(group.path, group.parent_fd)
    except (OSError, ValueError):
        return False


def _counting(files: cgroupfs.HeldFiles) -> bool:
    """Whether a v2 group has a controller whose counters cannot start again (True when its
    controllers cannot be read)."""
    try:
        return bool(NOT_RESTARTED.intersection(files.text("cgroup.controllers").split()))
    except OSError:
        return True


def parkable(group: Pooled) -> bool:
    """Whether a given-back group may be lent again, as far as what a run cannot undo says: no
    group below it, and (v2) no controller whose counters cannot start again as it was made (a
    controller switched on since is seen when it is started again, which reads them afresh)."""
    if group.counting:
        return False
    try:
        return _stat(group).st_nlink == 2
    except OSError:
        return False


def restarted(group: Pooled, ahead: bool) -> bool | None:
    """Whether the group is empty, and so its counters were started again as a fresh group's;
    None for an empty memory group whose charge is not 0 yet (it may be, for a later run).
    ``ahead``: its members are not read now (but through the memory group's fresh join fd), as
    ``take`` reads them afresh when it lends it (a group holding a task then is removed: zeroing
    its usage harmed nothing)."""
    files = group.files
    controllers = group.controllers
    memory = "memory" in controllers
    try:
        if _stat(group).st_nlink != 2:
            return False  # a group below it
        if not memory and not _as_made(group):
            return False  # a limit or a counter not as when it was made
        if controllers == V2:
            counting = NOT_RESTARTED.intersection(files.text("cgroup.controllers").split())
            return not counting and (ahead or _idle_v2(files))
        if "pids" in controllers:
            if (not ahead and files.number("pids.current") != 0) or files.number("pids.peak") > 1:
                return False
        if memory:  # its tasks are read by the fd it is joined through
            # Its settings once its charge is 0: a group still charged is tried again later (and
            # its settings read then), one whose settings changed is not lent (``remove`` closes
            # the tasks fd it was given).
            started = _memory_restarted(group, "cpuacct" in controllers, ahead)
            return started if not started else _as_made(group)
        if "cpuacct" in controllers:
            if not ahead and cgroupfs.v1_has_members(group.path, group.parent_fd):
                return False
            files.write("cpuacct.usage", "0")
    except (OSError, ValueError):
        return False
    return True


IDLE_EVENTS = b"populated 0\nfrozen 0\n"  # a v2 group's cgroup.events, empty and not frozen
THAWED = b"0\n"  # a v2 group's cgroup.freeze, no freeze asked for


def _idle_v2(files: cgroupfs.HeldFiles) -> bool:
    """Whether a v2 group may be lent now: no process in it or below it and not frozen
    (``cgroup.events``: ``populated 0``, ``frozen 0``; an empty group reads ``frozen 1`` as soon
    as its ``cgroup.freeze`` is 1, and a child cloned into it would be frozen at birth), then no
    freeze asked for (``cgroup.freeze`` 0). The second read closes a gap the first leaves: a
    job's last task that exits while its group's freeze is on clears ``populated`` and then sets
    ``frozen`` (one section under the kernel's ``css_set_lock``, which ``cgroup.events``' read
    does not take), so a read between the two finds the group empty and not frozen; its clone
    would then wait on that lock and be born frozen. The freeze was asked for before that exit,
    so a read of ``cgroup.freeze`` made after ``populated 0`` was seen finds it. A read, not an
    unconditional thaw (``0`` written): the kernel reads the switch without a lock where a write
    takes the host-wide ``cgroup_mutex``, and a group a job froze is removed as any group whose
    switches are not as made is, not thawed and lent. A kernel without the freezer (before
    5.2) has no such file and nothing to freeze."""
    events = files.content("cgroup.events")
    if events != IDLE_EVENTS:
        keys = cgroupfs.keyed_in(files, "cgroup.events")
        if keys.get("populated") != 0 or keys.get("frozen", 0) != 0:
            return False
    try:
        return files.content("cgroup.freeze") == THAWED
    except FileNotFoundError:
        return True


def _stat(group: Pooled) -> os.stat_result:
    """The group directory's facts: ``fstat`` of its directory fd (v2), else of the path fd its
    held files keep on it (``HeldFiles.facts``), read twice a lend (given back, started again)."""
    if group.dir_fd >= 0:
        return os.fstat(group.dir_fd)
    return group.files.facts()


def _memory_restarted(group: Pooled, cpuacct: bool, ahead: bool) -> bool | None:
    """``restarted`` for a memory group (``cpuacct``: that hierarchy's too), whose ``tasks`` fd
    its run's child joins through is opened here (afresh: it lists the members then) and kept
    only when the group is lent; its files stay open either way (the pool closes them, or
    keeps them while it is idle); raises OSError. ``ahead``: its tasks are opened by ``empty``
    when ``take`` lends it, once a lend (a v1 member list is read afresh only from a new open)."""
    files = group.files
    join_fd = -1 if ahead else cgroupfs.open_members(group.path, parent_fd=group.parent_fd)
    try:
        if join_fd >= 0 and os.pread(join_fd, 1, 0):
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


def _present(files: cgroupfs.HeldFiles, names: list[str]) -> tuple[tuple[str, ...], tuple[bytes, ...] | None]:
    """The files of ``names`` this kernel gives the group, and their content as made (None when
    one is there but unreadable: never lent again); read once, when it is made.

    Each content is kept as a copy: a longer file's bytes (past ``cgroupfs.FIRST_READ``) are a
    ``READ_CHUNK`` buffer shrunk in place, so kept for the group's life they would stay in the C
    heap where that buffer was, out of the interpreter's small-object arenas, and the batch's peak
    RSS grew with the groups made (bench/README.md, "The as-made check re-landed")."""
    found: list[str] = []
    contents: list[bytes] | None = []
    for name in names:
        try:
            content = files.content(name)
        except FileNotFoundError:
            continue
        except OSError:
            contents = None  # there, but unreadable
        else:
            if contents is not None:
                contents.append(bytes(memoryview(content)))  # a compact copy
        found.append(name)
    return tuple(found), None if contents is None else tuple(contents)


def _as_made(group: Pooled) -> bool:
    """Whether what a group's next run must find as a fresh group has it (``SETTINGS``: its
    limits, its switches and the counters that cannot start again) reads as when it was made;
    False when unreadable. Each file is read for one byte more than it held then: a read that
    matches is the whole file (a ``seq_file``'s short read is its end), and one longer cannot
    match, so the comparison is the whole content's at a read of a few bytes."""
    try:
        return group.settings is not None and group.files.same(group.setting_files, group.settings)
    except OSError:
        return False


def _swapped(files: cgroupfs.HeldFiles) -> bool:
    """Whether swap holds something charged to the group (which a swap-in would charge again);
    a kernel that does not count swap per group charges a swap-in to the task that faults."""
    try:
        return files.number("memory.memsw.usage_in_bytes") != 0
    except FileNotFoundError:
        return False


def remove(group: Pooled, attempts: int) -> bool:
    """Remove the group and every group below it (its fds first; ``attempts`` as
    ``cgroupfs.remove_group``'s), then its record once it is gone; whether it is."""
    if group.join_fd >= 0:
        os.close(group.join_fd)
        group.join_fd = -1
    group.files.close()
    if group.dir_fd >= 0:
        os.close(group.dir_fd)
        group.dir_fd = -1
    if group.controllers == V2:
        gone = cgroupfs.remove_group(group.path, attempts)
    else:
        gone = remove_v1_group(group.path, attempts)
    if gone:
        group.slot.close()
    return gone
