"""Caps through cgroup v1: a fresh group per run in the memory, pids and cpu hierarchies.

For hosts that mount the controllers as v1 hierarchies instead of delegating them to cgroup v2.
Each run group is made under this runner's own group in that hierarchy (so caps set above
still apply), is joined by the child between fork and exec through a pre-opened
``cgroup.procs`` fd, and is removed when the run ends (an accounting-only run on a lodged host
borrows its groups from the host's pool instead: ``pool``). The v1 groups only carry caps and
counters: membership and teardown stay with the containment mechanism.

Accounting (also for a run without caps, unless ``PROCESSKIT_ACCOUNTING=0``): peak memory from
``memory.max_usage_in_bytes`` (page cache included, as BenchExec reads it), OOM kills from
``memory.oom_control``, CPU from ``cpuacct.usage`` (ns), split by ``usage_user``/``usage_sys``, the peak
task count from ``pids.peak`` (recent kernels; like the cap, it counts threads). No ``blkio``
group: its counters only see I/O on a device that has a throttle rule, so they would report 0
for real I/O. The child joins through ``tasks``, not ``cgroup.procs`` (``accounting`` says why).

``PROCESSKIT_CGROUP_V1_ROOT=<dir>`` replaces discovery: run groups are made directly in
``<dir>/memory``, ``<dir>/pids``, ``<dir>/cpu`` and ``<dir>/cpuacct``. A directory that is not a
writable v1 hierarchy simulates a host where no v1 controller is usable (the tests do this).
"""

from __future__ import annotations

import os
import posixpath

from .. import envvars, mountinfo
from ..spec import Limits
from . import cgroupfs
from .accounting import Tally
from .errors import LimitUnavailable
from .limits import CONTROLLER, ControllerSet
from .members import exiting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lent import Pooled
    from .pool import Pool

CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
ACCOUNTED = ("memory", "pids", "cpuacct")  # the hierarchies a run's figures come from
SPLIT = ("cpuacct.usage_user", "cpuacct.usage_sys")


def own_groups() -> dict[str, str]:
    """Controller -> the directory of this process's group in that controller's v1 hierarchy, a
    real path (co-mounted controllers name one directory): found once per process, as the v2
    parent is (a batch makes its groups where it started)."""
    root = envvars.get("PROCESSKIT_CGROUP_V1_ROOT")
    if root:
        if root not in _ROOTED:  # its controllers' directories may be links to one (``cpu,cpuacct``)
            _ROOTED[root] = {controller: os.path.realpath(os.path.join(root, controller)) for controller in CONTROLLERS}
        return dict(_ROOTED[root])
    if not _OWN:
        found = _discovered()
        if not found:
            return found  # looked for again next time: nothing to keep
        _OWN.update(found)
    return dict(_OWN)


_OWN: dict[str, str] = {}  # what ``_discovered`` found, once it found something
_ROOTED: dict[str, dict[str, str]] = {}  # ``PROCESSKIT_CGROUP_V1_ROOT`` -> its controllers' real directories


def _discovered() -> dict[str, str]:
    """The groups under the mount points ``/proc/self/mountinfo`` names, real paths as the kernel
    gives them (no ``realpath``: ~45 us and an ``lstat`` a component, 18 a run, on this host of four)."""
    mounts: dict[str, tuple[str, str]] = {}  # controller -> (mount point, root of the mount)
    groups: dict[str, str] = {}
    try:
        for mount in mountinfo.mounts():
            if mount.fstype == "cgroup":
                for option in mount.super_options.split(","):
                    mounts[option] = (mount.mount_point, mount.root)
        for line in cgroupfs.read_text("/proc/self/cgroup").splitlines():
            if line:
                _, names, path = line.split(":", 2)
                for name in names.split(","):
                    if name in CONTROLLERS and name in mounts:
                        mount_point, mount_root = mounts[name]
                        relative = posixpath.relpath(path, mount_root)
                        if not relative.startswith(".."):
                            groups[name] = posixpath.normpath(posixpath.join(mount_point, relative))
    except OSError:
        return {}
    return groups


_PLANS: dict[tuple, list[tuple[str, tuple[str, ...]]]] = {}  # ``_hierarchies``' answers


def _hierarchies(parents: dict[str, str], needed: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """The hierarchies a run's groups are made in, each as its parent's real path and its
    controllers (sorted): co-mounted controllers (e.g. "cpu,cpuacct") share one hierarchy and
    so one group, and only a hierarchy a cap (``needed``) or a figure comes from gets one.
    Worked out once per process for each set of parents (a batch asks once a job); the parents
    are ``own_groups``' real paths, so one hierarchy's controllers name one directory."""
    key = (tuple(parents.items()), needed)
    plan = _PLANS.get(key)
    if plan is None:
        hierarchies: dict[str, list[str]] = {}
        for controller, parent in parents.items():
            hierarchies.setdefault(parent, []).append(controller)
        wanted = set(needed) | set(ACCOUNTED)
        plan = _PLANS[key] = [
            (parent, tuple(sorted(group))) for parent, group in hierarchies.items() if wanted.intersection(group)
        ]
    return plan


class CgroupV1Controllers(ControllerSet):
    backend = "cgroup_v1"
    EVIDENCE = {
        "memory": ("memory", "memory.oom_control", "oom_kill"),
        "processes": ("pids", "pids.events", "max"),
        "cpu": ("cpu", "cpu.stat", "nr_throttled"),
    }
    MEMORY_MAX = "memory.limit_in_bytes"

    def __init__(self, limits: Limits, name: str, parents: dict[str, str] | None = None, pool: Pool | None = None):
        """``pool``: a lodged host's, lending the groups (an accounting-only run's: caps are
        never put on a lent group)."""
        super().__init__(limits)
        self._groups: dict[str, str] = {}  # controller -> the run's group directory
        self._paths: list[str] = []  # the groups made for this run alone
        self._fds: list[int] = []
        self._pool = pool if not self.capped else None
        self._lent: list[Pooled] = []
        parents = own_groups() if parents is None else parents
        needed = {CONTROLLER[axis]: axis for axis in self.capped}
        for controller, axis in needed.items():
            if controller not in parents:
                raise LimitUnavailable(axis, f"cgroup_v1: no {controller} hierarchy is mounted")
        try:
            for parent, controllers in _hierarchies(parents, tuple(needed)):
                self._make(parent, name, controllers, needed)
            self._apply(limits)
        except LimitUnavailable:
            self.release()
            raise

    def _make(self, parent: str, name: str, controllers: tuple[str, ...], needed: dict[str, str]) -> None:
        """Create one hierarchy's group (or borrow the pool's); only a hierarchy that carries a
        cap (``needed``: controller -> axis) must succeed."""
        try:
            if self._pool is not None:
                lent = self._pool.take(parent, controllers)
                self._lent.append(lent)
                self._fds.append(lent.join_fd)
                path = lent.path
            else:
                path = os.path.join(parent, name)
                self._fds.append(cgroupfs.make_group(path, join_file="tasks"))
                self._paths.append(path)
        except OSError as exc:
            axes = [needed[c] for c in controllers if c in needed]
            if axes:
                raise LimitUnavailable(axes[0], f"cgroup_v1: cannot use {exc.filename}: {exc.strerror}") from None
            return  # accounting only: its figures stay null
        self._groups.update(dict.fromkeys(controllers, path))

    def _dir(self, controller: str) -> str | None:
        return self._groups.get(controller)

    @property
    def paths(self) -> list[str]:
        """The groups made for this run alone, one per hierarchy (a lent group is recorded by its pool)."""
        return list(self._paths)

    def remaining(self) -> list[str]:
        """The groups made for this run alone that are still there: all until ``release``, then
        those it could not remove."""
        return self.paths

    def counts_cpu(self) -> bool:
        """Whether a cpuacct group of this run's gives its CPU figures (none then come from v2)."""
        return "cpuacct" in self._groups

    def _cpu_max(self, quota_us: int, period_us: int) -> list[tuple[str, str]]:
        # the period first: a quota is checked against the period in force
        return [("cpu.cfs_period_us", str(period_us)), ("cpu.cfs_quota_us", str(quota_us))]

    def procs_fds(self) -> tuple[int, ...]:
        return tuple(self._fds)

    def _where(self, controller: str) -> str | cgroupfs.HeldFiles | None:
        """Where the run's group for ``controller`` is read: a lent group's held files, else its
        directory."""
        for lent in self._lent:
            if controller in lent.controllers:
                return lent.files
        return self._groups.get(controller)

    def left(self, members: list[int] | None) -> list[str]:
        """The capped axes a member is outside of: one that wrote itself into another group of the
        hierarchy (root may), whatever its container's group says, runs without that cap. Read
        from each member's ``/proc/<pid>/cgroup``, for a capped run alone; one on its way out
        (``exiting``, read after: its v1 groups read as ``/`` from then on) is left out; every
        capped axis where the members could not be read (None)."""
        groups = {
            axis: f"/{posixpath.basename(self._groups[CONTROLLER[axis]])}/"
            for axis in self.capped
            if CONTROLLER[axis] in self._groups
        }
        if members is None:
            return list(groups)
        outside: set[str] = set()
        try:
            for pid in members if groups else ():
                try:
                    lines = cgroupfs.read_text(f"/proc/{pid}/cgroup").splitlines()
                except (FileNotFoundError, ProcessLookupError):
                    continue
                found: set[str] = set()
                for line in lines:
                    _, controllers, path = line.split(":", 2)
                    names = controllers.split(",")
                    found.update(a for a, g in groups.items() if CONTROLLER[a] in names and g not in f"{path}/")
                if found and not exiting(pid):
                    outside |= found
        except (OSError, ValueError):
            return list(groups)
        return sorted(outside)

    def account(self, tally: Tally) -> None:
        memory, cpuacct, pids = self._where("memory"), self._where("cpuacct"), self._where("pids")
        if memory is not None:
            peak = cgroupfs.optional_int_in(memory, "memory.max_usage_in_bytes")
            tally.offer("peak_memory_bytes", peak, "memory.max_usage_in_bytes (v1)")
            tally.offer(
                "oom_kills",
                cgroupfs.key_in(memory, "memory.oom_control", "oom_kill"),
                "memory.oom_control oom_kill (v1)",
            )
        if cpuacct is not None:
            usage = cgroupfs.optional_int_in(cpuacct, "cpuacct.usage")
            tally.offer_ns("cpu_ns", usage, "cpuacct.usage (v1)")
            user, system = (cgroupfs.optional_int_in(cpuacct, name) for name in SPLIT)
            if usage is not None and user is not None and system is not None:
                # The split is sampled at ticks; scaled to the exact total, as cpu.stat's is.
                user = usage * user // (user + system) if user + system else 0
                source = "cpuacct.usage split as cpuacct.usage_user/usage_sys (v1)"
                tally.offer_ns("user_ns", user, source)
                tally.offer_ns("system_ns", usage - user, source)
        if pids is not None:
            tally.offer("peak_process_count", cgroupfs.optional_int_in(pids, "pids.peak"), "pids.peak (v1)")

    def release(self) -> None:
        lent_fds = {lent.join_fd for lent in self._lent}
        for fd in self._fds:
            if fd not in lent_fds:  # a lent group's fd stays with it
                os.close(fd)
        self._fds = []
        # What could not be removed stays listed (``remaining``): the run's directory, which
        # speaks for it, is then kept for a sweep (``rundir.RunDir.close``).
        self._paths = [path for path in self._paths if not _removed(path)]
        while self._lent:
            assert self._pool is not None, "only a pool lends"
            self._pool.give(self._lent.pop())


def _removed(path: str) -> bool:
    """A run's v1 group removed at its release (``stragglers.remove_v1_group``), its ``rmdir``
    tried here first: where the tree is gone, the common case, nothing more is loaded."""
    if cgroupfs.remove_group(path, 1):
        return True
    from .stragglers import remove_v1_group

    return remove_v1_group(path)
