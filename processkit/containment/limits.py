"""Resource caps as a layer over containment: cgroup controllers the run's tree is joined to.

The containment mechanism (a cgroup v2 group or a process group) owns membership and teardown.
A ControllerSet enforces ``--max-memory``, ``--max-processes`` and ``--cpu-quota`` on the whole
tree and reads the kernel's own counters back for ``limit_evidence`` and ``resource_summary``.
Backends: the controllers of the run's own cgroup v2 group where the host delegates them
(``cgroup_v2``), else fresh groups in the cgroup v1 hierarchies (``cgroup_v1``).

What ``tripped`` means per axis, always from the controller's own counter, never inferred from
an exit status (a SIGKILL looks the same whether the cap or something else sent it):
memory: the kernel had to OOM inside the group; processes: a fork was refused by the cap;
cpu: the tree was throttled by the quota at least once. An axis without a cap is ``not_tripped``;
a counter that cannot be read is ``unknown``.
"""

from __future__ import annotations

import abc
import errno
import os

from ..spec import Limits
from . import cgroupfs
from .accounting import Tally
from .errors import LimitUnavailable

AXES = ("memory", "processes", "cpu")
CONTROLLER = {"memory": "memory", "processes": "pids", "cpu": "cpu"}

PID_MAX_LIMIT = 4 * 1024 * 1024  # the kernel's pid ceiling (64-bit) and the most pids.max accepts
CFS_PERIOD_US = 100_000
CFS_LONG_PERIOD_US = 1_000_000  # the kernel's longest period: lets small quotas clear the floor
CFS_MIN_QUOTA_US = 1_000
CFS_MAX_QUOTA_US = (1 << 44) - 1  # the kernel's largest (MAX_BW): cpu.max refuses more


def capped_axes(limits: Limits) -> list[str]:
    values = {"memory": limits.max_memory, "processes": limits.max_processes, "cpu": limits.cpu_quota}
    return [axis for axis in AXES if values[axis] is not None]


def pids_max(count: int) -> str:
    """A ``--max-processes`` above the kernel's pid ceiling is already enforced by the kernel."""
    return str(min(count, PID_MAX_LIMIT))


def cfs_quota(cores: float) -> tuple[int, int]:
    """``(quota_us, period_us)`` for ``cores``; raises LimitUnavailable below the kernel's floor
    or above its ceiling (``--cpu-quota 1e308`` is a finite number, but no quota)."""
    if cores * CFS_PERIOD_US > CFS_MAX_QUOTA_US:
        ceiling = CFS_MAX_QUOTA_US / CFS_PERIOD_US
        raise LimitUnavailable(
            "cpu", f"a quota of {cores} cores is above the kernel's largest CPU quota ({ceiling:g} cores)"
        )
    for period in (CFS_PERIOD_US, CFS_LONG_PERIOD_US):
        quota = round(cores * period)
        if quota >= CFS_MIN_QUOTA_US:
            return quota, period
    floor = CFS_MIN_QUOTA_US / CFS_LONG_PERIOD_US
    raise LimitUnavailable("cpu", f"a quota of {cores} cores is below the kernel's smallest CPU quota ({floor} cores)")


class ControllerSet(abc.ABC):
    """One backend's groups for a run: set up (caps written) on construction, joined pre-exec."""

    backend: str
    # axis -> (controller, flat-keyed file, counter that is non-zero once the cap engaged)
    EVIDENCE: dict[str, tuple[str, str, str]]
    MEMORY_MAX: str  # the memory controller's file that takes the cap in bytes

    def __init__(self, limits: Limits):
        self.capped = capped_axes(limits)

    def remaining(self) -> list[str]:
        """The groups made for this run alone not removed yet (``Container.remaining``)."""
        return []

    @abc.abstractmethod
    def _dir(self, controller: str) -> str | None:
        """The run's group directory for ``controller``, or None where the run has none."""

    def _settings(self, limits: Limits) -> list[tuple[str, str, str, str]]:
        """``(axis, controller, file, value)`` writes that put the requested caps in force: which
        cap goes to which controller is the same in both hierarchies, only the files differ."""
        writes = []
        if limits.max_memory is not None:
            writes.append(("memory", "memory", self.MEMORY_MAX, str(limits.max_memory)))
        if limits.max_processes is not None:
            writes.append(("processes", "pids", "pids.max", pids_max(limits.max_processes)))
        if limits.cpu_quota is not None:
            writes += [("cpu", "cpu", name, value) for name, value in self._cpu_max(*cfs_quota(limits.cpu_quota))]
        return writes

    @abc.abstractmethod
    def _cpu_max(self, quota_us: int, period_us: int) -> list[tuple[str, str]]:
        """The ``(file, value)`` writes of the cpu controller that set this quota, in order."""

    def _file(self, controller: str, name: str) -> str:
        """``name`` in the run's group for ``controller``; FileNotFoundError where it has none."""
        directory = self._dir(controller)
        if directory is None:
            raise FileNotFoundError(errno.ENOENT, f"no {controller} group for this run", name)
        return os.path.join(directory, name)

    def _apply(self, limits: Limits) -> None:
        for axis, controller, name, value in self._settings(limits):
            try:
                cgroupfs.write_text(self._file(controller, name), value)
            except OSError as exc:
                raise LimitUnavailable(
                    axis, f"{self.backend}: cannot write {value} to {name}: {exc.strerror}"
                ) from None

    def procs_fds(self) -> tuple[int, ...]:
        """``cgroup.procs`` fds of groups the child joins before exec, after its container."""
        return ()

    def evidence(self) -> dict[str, str]:
        verdicts = {}
        for axis in AXES:
            if axis not in self.capped:
                verdicts[axis] = "not_tripped"
                continue
            controller, name, counter = self.EVIDENCE[axis]
            try:
                tripped = cgroupfs.read_keyed(self._file(controller, name))[counter] > 0
            except (OSError, KeyError, ValueError):
                verdicts[axis] = "unknown"
            else:
                verdicts[axis] = "tripped" if tripped else "not_tripped"
        return verdicts

    def left(self, members: list[int] | None) -> list[str]:
        """The capped axes whose group does not hold every one of ``members`` (each such axis
        where they could not be read: None): none here, where the caps are the container's own
        group's."""
        return []

    def account(self, tally: Tally) -> None:
        """Give the figures this backend counts beyond the container's; raises OSError."""

    def release(self) -> None:
        """Remove whatever this backend created; called once the tree is gone."""
