"""Per-run cgroup v2 containment: membership from before exec, ``cgroup.kill`` for teardown.

The child is cloned straight into the group (``CLONE_INTO_CGROUP``) or writes itself into
``cgroup.procs`` between fork and exec, so nothing it starts can be outside the group; ``setsid``
and double forks do not leave a cgroup. Where the host delegates the memory, pids and cpu
controllers, the same group also carries the run's caps (``caps_v2``, imported by runs with caps).

``PROCESSKIT_CGROUP_PARENT=<dir>`` replaces discovery of the parent group; a directory that is
not a writable cgroup2 group makes runs fall back to a process group (and caps to cgroup v1).
"""

from __future__ import annotations

import os

from .. import mountinfo
from .. import signum as signals
from . import cgroupfs
from .accounting import Tally
from .base import Container
from .errors import ContainerError, failed
from .members import exiting, kill_ended_alone, process_of, signal_listed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lent import Pooled
    from .members import LiveUsage
    from .pool import Pool


def find_parent() -> str | None:
    """The cgroup2 directory this runner lives in, where a run's group is created."""
    return parent_and_own()[0]


def parent_and_own() -> tuple[str | None, str | None]:
    """``find_parent``'s directory and this process's own ``group_line``, from one read of
    ``/proc/self/cgroup`` (the line None where it cannot be read)."""
    override = os.environ.get("PROCESSKIT_CGROUP_PARENT") or None
    try:
        line = group_line()
    except OSError:
        return override, None
    if override is not None:
        return override, line
    try:
        mount, own = _placed(line)
    except OSError:
        return None, line
    return own if own is not None else mount, line


def group_line(pid: int | str = "self") -> str | None:
    """The group ``pid`` is in below the cgroup2 mount: its ``/proc/<pid>/cgroup`` ``0::`` line,
    None where it has none; OSError where the file cannot be read (a process gone)."""
    return v2_line(cgroup_lines(pid))


def cgroup_lines(pid: int | str = "self") -> list[str]:
    """``/proc/<pid>/cgroup``'s lines, a v1 hierarchy's and the v2 one's; OSError where the file
    cannot be read (a process gone)."""
    return cgroupfs.read_text(f"/proc/{pid}/cgroup").splitlines()


def v2_line(lines: list[str]) -> str | None:
    """The v2 group among ``cgroup_lines``' (its ``0::`` line), None where there is none."""
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def own_group() -> tuple[str | None, str | None]:
    """The cgroup2 mount and this process's own group's directory: its ``/proc/self/cgroup``
    ``0::`` line below the root of the mount that holds it (a container's delegated subtree is
    mounted with that subtree as its root); each None where it cannot be told (a group above
    every mount's root, as a cgroup namespace made after the mount shows it)."""
    try:
        return _placed(group_line())
    except OSError:
        return None, None


def _placed(own: str | None) -> tuple[str | None, str | None]:
    """``own_group`` for this process's ``group_line`` ``own``; OSError where the mounts cannot
    be read."""
    mounts = _cgroup2_mounts()
    if not mounts:
        return None, None
    for mount in mounts:
        below = None if own is None else within(own, mount.root)
        if below is not None:
            return mount.mount_point, os.path.join(mount.mount_point, below) if below else mount.mount_point
    return mounts[0].mount_point, None


def within(where: str, shown: str) -> str | None:
    """What of the group ``where`` lies below the group ``shown`` ("" for that group itself),
    None where it is neither: both as ``/proc/<pid>/cgroup`` and mountinfo show groups, from
    this process's cgroup namespace. The one comparison of group lines (``holds``,
    ``own_group``, ``leftovers.v2_keeps``)."""
    if where == shown:
        return ""
    above = shown.rstrip("/") + "/"
    return where[len(above) :] if where.startswith(above) else None


def shown_path(path: str) -> str:
    """The group at ``path`` as ``/proc/<pid>/cgroup`` names it to this process: its path below
    the cgroup2 mount, under the mount's own root (both shown from this process's cgroup
    namespace); "" where no cgroup2 mount holds ``path``."""
    mounts = [m for m in _cgroup2_mounts() if _under(path, m.mount_point)]
    mount = max(mounts, key=lambda m: len(m.mount_point), default=None)  # the innermost mount
    if mount is None:
        return ""
    below = path[len(mount.mount_point) :].strip("/")
    return "/" + "/".join(part for part in (mount.root.strip("/"), below) if part)


def _cgroup2_mounts() -> list[mountinfo.Mount]:
    """The cgroup2 mounts in force: of several at one mount point (a subtree bound over the
    whole hierarchy, a tmpfs over the mount), the last of any type, which hides the others (as
    ``mountinfo.filesystem_type`` takes it); raises OSError as ``mounts`` does."""
    found = {mount.mount_point: mount for mount in mountinfo.mounts()}
    return [mount for mount in found.values() if mount.fstype == "cgroup2"]


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/")
    return path == directory or path.startswith(directory + "/")


MEMBER_READS = 3  # reads of a subtree whose lists and ``populated`` disagree (``member_pids``)
ACCOUNTED = ("memory", "pids", "io")  # the controllers whose counters a run's figures use
CPU_KEYS = (("cpu_ns", "usage_usec"), ("user_ns", "user_usec"), ("system_ns", "system_usec"))


def _pressure_us(where: str | cgroupfs.HeldFiles) -> int:
    """``cpu.pressure``'s first line's ``total=`` (``some avg10=0.00 avg60=0.00 avg300=0.00
    total=N``); raises OSError (no PSI: the file is absent) or ValueError."""
    _, found, total = cgroupfs.text_in(where, "cpu.pressure").split("\n", 1)[0].rpartition("total=")
    if not found:
        raise ValueError("cpu.pressure holds no total")
    return int(total)


def enable_accounting(parent: str) -> None:
    """Switch on, for the parent's children, the accounting controllers it offers; best effort,
    once per parent and process (a batch's later groups find them on).

    Left on, as the caps leave theirs. The kernel refuses it in a non-root group that holds
    processes (the runner's own, often): the figures then come from cgroup v1 or stay null.
    """
    if parent in _ENABLED:
        return
    _ENABLED.add(parent)
    try:
        offered = cgroupfs.read_text(os.path.join(parent, "cgroup.controllers")).split()
        subtree = os.path.join(parent, "cgroup.subtree_control")
        missing = [name for name in ACCOUNTED if name in offered and name not in cgroupfs.read_text(subtree).split()]
        if missing:
            cgroupfs.write_text(subtree, " ".join(f"+{name}" for name in missing))
    except OSError:
        pass


_ENABLED: set[str] = set()  # the parents ``enable_accounting`` has seen in this process


class CgroupV2(Container):
    mechanism = "cgroup_v2"
    _lent: Pooled | None = None  # the group, when a pool lent it
    _removed = False  # its own group was removed (``_remaining``)
    _shown: str | None = None  # the group's path in ``/proc/<pid>/cgroup`` (``holds``), found at its first call
    _cpu_base: dict[str, int] = {}  # cpu.stat at the start of this run, for a reused group (replaced, never changed)
    _wait_base: int | None = None  # cpu.pressure's total at ``count_waits`` (0 for a fresh group), None: not counted

    def __init__(self, parent: str, name: str, pool: Pool | None = None):
        """``pool``: a lodged host's, which lends the group (see ``containment.pool``)."""
        self._pool = pool
        if pool is not None:
            import processkit.containment.lent as lent  # (a function's import: ``containment._lender`` says why this form)

            try:
                self._lent = pool.take(parent, lent.V2)
            except OSError as exc:
                raise ContainerError(f"cannot create cgroup under {parent}: {exc.strerror}") from exc
            self.path, self._procs_fd, self._dir_fd = self._lent.path, self._lent.join_fd, self._lent.dir_fd
            return
        self.path = os.path.join(parent, name)
        try:
            self._procs_fd = cgroupfs.make_group(self.path)
        except OSError as exc:
            raise ContainerError(f"cannot create cgroup {self.path}: {exc.strerror}") from exc
        try:
            self._dir_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self._dir_fd = -1  # the child then joins through cgroup.procs alone

    def start_counting(self, cpu_counted: bool) -> None:
        """A reused group whose ``cpu.stat`` gives this run's CPU figures: what it held before
        the run is taken off them (a fresh group starts at 0)."""
        if self._lent is not None and self._lent.reused and not cpu_counted:
            try:
                self._cpu_base = cgroupfs.keyed_in(self._lent.files, "cpu.stat")
            except (OSError, ValueError) as exc:
                raise failed(f"cannot read {self._file('cpu.stat')}: {exc}", exc) from None

    def count_waits(self) -> None:
        """The group's ``cpu.pressure`` ``some`` total (µs), a reused group's as it stands now:
        the time its tasks were runnable with none on a CPU, each CPU weighted by the time the
        group kept it busy (PSI), so a sum of its tasks' waits only on one CPU (docs/bench.md)."""
        try:
            self._wait_base = _pressure_us(self._where()) if self._lent is not None and self._lent.reused else 0
        except (OSError, ValueError):
            self._wait_base = None

    def waited_ns(self) -> int | None:
        if self._wait_base is None:
            return None
        try:
            return max(_pressure_us(self._where()) - self._wait_base, 0) * 1000
        except (OSError, ValueError):
            return None

    def _group_fds(self) -> tuple[int, int]:
        return self._dir_fd, self._procs_fd

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _where(self) -> str | cgroupfs.HeldFiles:
        """Where the group's files are read: a lent group's held files, else its directory."""
        return self._lent.files if self._lent is not None else self.path

    def member_pids(self) -> list[int]:
        """The members of the group and of every group below it (a process of the run may make
        one and move into it: the group's own ``cgroup.procs`` does not list it). ``cgroup.events``
        first: ``populated 0`` says at once that nothing is in the subtree (a run's tree at its
        end, most often: one read, not the lists and the link count too). Read twice at most
        more when the lists come back empty while it says a process is in the subtree (one
        moving between two groups as they were read); still so, where every thread the subtree
        lists has begun its exit, their processes (one whose leader ended alone, ``pthread_exit``:
        ``cgroup.procs`` leaves it out once its last thread's exit begins, while that thread keeps
        the group populated until the exit is done, a large memory freed meanwhile); no thread
        listed (a member moving, a group below unreadable) is none only where ``populated`` now
        says 0; else an OSError, which the teardown takes as members it cannot count, and kills."""
        return self._listed(skip_unreadable=False)

    def _reachable(self) -> list[int]:
        """``member_pids``, a group below that cannot be read passed over: the members a signal
        or a kill can reach, one unread group keeping none of them from it (never a count)."""
        return self._listed(skip_unreadable=True)

    def _listed(self, skip_unreadable: bool) -> list[int]:
        where = self._where()
        for _ in range(MEMBER_READS):
            if not cgroupfs.populated(where):
                return []
            found = [int(line) for line in cgroupfs.text_in(where, "cgroup.procs").split()]
            if cgroupfs.has_groups_below(self.path, self._dir_fd):
                found = sorted(set(found + cgroupfs.pids_below(self.path, skip_unreadable=skip_unreadable)))
            if found:
                return found
        threads = cgroupfs.subtree_ids(self.path, "cgroup.threads", skip_unreadable)
        if threads and all(exiting(tid) for tid in threads):  # their processes: a member until its exit is done
            return sorted({pid for pid in map(process_of, threads) if pid is not None})
        if not threads and not cgroupfs.populated(where):  # emptied since: none listed is no proof
            return []
        raise OSError(f"the members of {self.path} move between its groups as they are read")

    def holds(self, pid: int) -> bool:
        """From the peer's own ``/proc/<pid>/cgroup`` (its ``0::`` line, the v2 one on a hybrid
        host too): the run's group or one below it. One short file per peer classified, where the
        group's ``cgroup.procs`` grows with the run (bench/README.md, mend57d). Its path is as
        the runner's cgroup namespace shows it, whatever the peer's own; a group not under a
        cgroup2 mount is asked its members, and a pid not among them whether it is gone."""
        if self._shown is None:
            self._shown = shown_path(self.path)
        if not self._shown:
            if pid in self.member_pids():
                return True
            os.getpgid(pid)  # ProcessLookupError for one gone
            return False
        where = group_line(pid)
        return where is not None and within(where, self._shown) is not None

    def signal_members(self, signum: int) -> None:
        """``signum`` to each member by its pid, pinned (``members.signal_listed``): one that
        ended since ``cgroup.procs`` was read, its pid handed on outside the group, is not
        signalled; one in a group below that cannot be read is not reached, the others are
        (``_reachable``)."""
        signal_listed(self._reachable(), signum, self._reachable)

    def kill_all(self) -> None:
        """``cgroup.kill``, then by its pid a member whose main thread alone ended, which that
        kill misses (``members.kill_ended_alone``); a lent group only when something is left to
        kill, since a child cloned into a group after its ``cgroup.kill`` is killed at birth
        (``containment.pool``)."""
        if self._lent is not None:
            try:
                if not cgroupfs.populated(self._lent.files):
                    return  # nothing in it or below it, and nothing can fork into it
            except (OSError, ValueError):
                pass  # unreadable: killed as any group is
            self._lent.killed = True
        try:
            cgroupfs.write_text(self._file("cgroup.kill"), "1")
        except FileNotFoundError:  # kernels before 5.14: kill member by member
            self.signal_members(signals.SIGKILL)
            return
        try:
            pids = self._reachable()
            if pids:  # what cgroup.kill misses, among those whose main thread is not listed
                kill_ended_alone(pids, set(cgroupfs.subtree_ids(self.path, "cgroup.threads", skip_unreadable=True)))
        except OSError:
            pass  # the kill was written: what is left, the teardown reads and lists

    def _account(self, tally: Tally, live: LiveUsage | None = None) -> None:
        """``cpu.stat`` always exists; the peaks, OOM kills and ``io.stat`` only where their
        controller is on (``enable_accounting``). A file whose figures the tally already has
        (from cgroup v1, which gives first) is not read: the first figure given stays anyway."""
        if any(tally.missing(field) for field, _ in CPU_KEYS):
            cpu = cgroupfs.keyed_in(self._where(), "cpu.stat")
            for field, key in CPU_KEYS:
                value = cpu.get(key)
                if value is not None:
                    value = (value - self._cpu_base.get(key, 0)) * 1000
                tally.offer_ns(field, value, f"cpu.stat {key} (v2)")
        if self._lent is not None and self._lent.reused:  # lent again only with no memory, pids or io controller
            return
        for field, name in (("peak_memory_bytes", "memory.peak"), ("peak_process_count", "pids.peak")):
            if tally.missing(field):
                tally.offer(field, cgroupfs.read_optional_int(self._file(name)), f"{name} (v2)")
        try:
            tally.offer(
                "oom_kills", cgroupfs.key_in(self.path, "memory.events", "oom_kill"), "memory.events oom_kill (v2)"
            )
            io_lines = cgroupfs.read_text(self._file("io.stat")).splitlines()
        except FileNotFoundError:
            return
        # One line per device: "MAJ:MIN rbytes=N wbytes=N rios=N ..."
        counters = [dict(item.split("=", 1) for item in line.split()[1:]) for line in io_lines if line.strip()]
        tally.offer("io_read_bytes", sum(int(c.get("rbytes", 0)) for c in counters), "io.stat rbytes (v2)")
        tally.offer("io_write_bytes", sum(int(c.get("wbytes", 0)) for c in counters), "io.stat wbytes (v2)")

    def _remove(self) -> None:
        if self._lent is not None:
            assert self._pool is not None, "only a pool lends"
            self._pool.give(self._lent)
            return
        os.close(self._procs_fd)
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
        self._removed = cgroupfs.remove_group(self.path)

    def _remaining(self) -> list[str]:
        """Its group until ``_remove`` removed it (a lent one is its pool's to remove)."""
        return [] if self._lent is not None or self._removed else [self.path]
