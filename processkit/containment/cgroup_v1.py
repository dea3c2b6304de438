"""Caps through cgroup v1: a fresh group per run in the memory, pids and cpu hierarchies.

For hosts that mount the controllers as v1 hierarchies instead of delegating them to cgroup v2.
Each run group is made under this runner's own group in that hierarchy (so caps set above
still apply), is joined by the child between fork and exec through a pre-opened
``cgroup.procs`` fd, and is removed when the run ends. The v1 groups only carry caps and
counters: membership and teardown stay with the containment mechanism.

Accounting: peak memory from ``memory.max_usage_in_bytes``, CPU from ``cpuacct.usage``, the
peak task count from ``pids.peak`` (recent kernels; like the cap, it counts threads). I/O stays
null: on current kernels v1 ``blkio`` throttle counters only see I/O that passes a throttle
rule, so they would report 0 for real I/O.

``PROCESSKIT_CGROUP_V1_ROOT=<dir>`` replaces discovery: run groups are made directly in
``<dir>/memory``, ``<dir>/pids``, ``<dir>/cpu`` and ``<dir>/cpuacct``. A directory that is not a
writable v1 hierarchy simulates a host where no v1 controller is usable (the tests do this).
"""

from __future__ import annotations

import os
import posixpath

from ..spec import Limits
from . import cgroupfs
from .errors import LimitUnavailable
from .limits import CONTROLLER, ControllerSet, cfs_quota, pids_max

CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")


def own_groups() -> dict[str, str]:
    """Controller -> the directory of this process's group in that controller's v1 hierarchy."""
    root = os.environ.get("PROCESSKIT_CGROUP_V1_ROOT")
    if root:
        return {controller: os.path.join(root, controller) for controller in CONTROLLERS}
    mounts: dict[str, tuple[str, str]] = {}  # controller -> (mount point, root of the mount)
    groups: dict[str, str] = {}
    try:
        for mount in cgroupfs.mounts():
            if mount.fstype == "cgroup":
                for option in mount.super_options.split(","):
                    mounts[option] = (mount.mount_point, mount.root)
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                _, names, path = line.rstrip("\n").split(":", 2)
                for name in names.split(","):
                    if name in CONTROLLERS and name in mounts:
                        mount_point, mount_root = mounts[name]
                        relative = posixpath.relpath(path, mount_root)
                        if not relative.startswith(".."):
                            groups[name] = posixpath.normpath(posixpath.join(mount_point, relative))
    except OSError:
        return {}
    return groups


class CgroupV1Controllers(ControllerSet):
    backend = "cgroup_v1"
    EVIDENCE = {
        "memory": ("memory", "memory.oom_control", "oom_kill"),
        "processes": ("pids", "pids.events", "max"),
        "cpu": ("cpu", "cpu.stat", "nr_throttled"),
    }
    # ResourceFigures field -> (controller, file, units per reported unit)
    COUNTERS = {
        "peak_memory_bytes": ("memory", "memory.max_usage_in_bytes", 1),
        "total_cpu_ms": ("cpuacct", "cpuacct.usage", 1_000_000),
        "peak_process_count": ("pids", "pids.peak", 1),
    }

    def __init__(self, limits: Limits, name: str):
        super().__init__(limits)
        self._groups: dict[str, str] = {}  # controller -> the run's group directory
        self._paths: list[str] = []
        self._fds: list[int] = []
        parents = own_groups()
        needed = {CONTROLLER[axis]: axis for axis in self.capped}
        for controller, axis in needed.items():
            if controller not in parents:
                raise LimitUnavailable(axis, f"cgroup_v1: no {controller} hierarchy is mounted")
        # Co-mounted controllers (e.g. "cpu,cpuacct") share one hierarchy and so one group.
        hierarchies: dict[str, list[str]] = {}
        for controller, parent in parents.items():
            hierarchies.setdefault(os.path.realpath(parent), []).append(controller)
        try:
            for parent, controllers in hierarchies.items():
                self._make(os.path.join(parent, name), controllers, [needed[c] for c in controllers if c in needed])
            self._apply(limits)
        except LimitUnavailable:
            self.release()
            raise

    def _make(self, path: str, controllers: list[str], axes: list[str]) -> None:
        """Create one hierarchy's group; only a hierarchy that carries a cap must succeed."""
        try:
            self._fds.append(cgroupfs.make_group(path))
        except OSError as exc:
            if axes:
                raise LimitUnavailable(axes[0], f"cgroup_v1: cannot use {exc.filename}: {exc.strerror}") from None
            return  # accounting only: its figures stay null
        self._paths.append(path)
        self._groups.update(dict.fromkeys(controllers, path))

    def _dir(self, controller: str) -> str | None:
        return self._groups.get(controller)

    def _settings(self, limits: Limits) -> list[tuple[str, str, str, str]]:
        writes = []
        if limits.max_memory is not None:
            writes.append(("memory", "memory", "memory.limit_in_bytes", str(limits.max_memory)))
        if limits.max_processes is not None:
            writes.append(("processes", "pids", "pids.max", pids_max(limits.max_processes)))
        if limits.cpu_quota is not None:
            quota, period = cfs_quota(limits.cpu_quota)
            writes.append(("cpu", "cpu", "cpu.cfs_period_us", str(period)))
            writes.append(("cpu", "cpu", "cpu.cfs_quota_us", str(quota)))
        return writes

    def procs_fds(self) -> tuple[int, ...]:
        return tuple(self._fds)

    def accounting(self) -> dict[str, int | None]:
        measured = {}
        for field, (controller, name, unit) in self.COUNTERS.items():
            directory = self._dir(controller)
            value = cgroupfs.read_optional_int(os.path.join(directory, name)) if directory else None
            measured[field] = value // unit if value is not None else None
        return measured

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        for path in self._paths:
            _evacuate(path)
            cgroupfs.remove_group(path)
        self._paths = []


def _evacuate(path: str) -> None:
    """Move any process still in the group to its parent so the group can go.

    Under the cgroup v2 mechanism the tree is gone by now. Under a process group, a member that
    left the group (``setsid``) outlives teardown, as that mechanism documents; it keeps
    running, but the run's group must not outlive the run.
    """
    try:
        stragglers = cgroupfs.member_pids(path)
        if not stragglers:
            return
        parent = os.open(os.path.join(os.path.dirname(path), "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return  # the rmdir that follows then fails and the group stays: nothing more to try
    try:
        for pid in stragglers:
            try:
                os.write(parent, str(pid).encode())
            except ProcessLookupError:
                pass  # exited meanwhile
    finally:
        os.close(parent)
