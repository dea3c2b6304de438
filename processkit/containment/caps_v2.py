"""Caps through the run's own cgroup v2 group, whose parent must offer the controllers.

The group itself is ``cgroup_v2``'s (membership and teardown); this layer writes the caps into
it and reads the kernel's evidence back. Only a run that asks for a cap imports it.
"""

from __future__ import annotations

import os

from ..spec import Limits
from . import cgroupfs
from .cgroup_v2 import CgroupV2
from .errors import LimitUnavailable
from .limits import CONTROLLER, ControllerSet
from .members import exiting


class CgroupV2Controllers(ControllerSet):
    """Caps written into the run's own v2 group, whose parent must offer the controllers.

    A controller the parent offers but has not switched on for its children is switched on
    (``+memory`` in its ``cgroup.subtree_control``) and left on: other runs may rely on it. The
    kernel refuses that in a non-root group that holds processes, and the run then fails over.
    The group's own accounting (``CgroupV2._accounting``) already covers the summary.
    """

    backend = "cgroup_v2"
    EVIDENCE = {
        "memory": ("memory", "memory.events", "oom"),
        "processes": ("pids", "pids.events", "max"),
        "cpu": ("cpu", "cpu.stat", "nr_throttled"),
    }
    MEMORY_MAX = "memory.max"

    def __init__(self, group: CgroupV2, limits: Limits):
        super().__init__(limits)
        self._group = group
        self._path = group.path
        parent = os.path.dirname(group.path)
        for axis in self.capped:
            _enable(parent, CONTROLLER[axis], axis)
        self._apply(limits)

    def _dir(self, controller: str) -> str:
        return self._path

    def _cpu_max(self, quota_us: int, period_us: int) -> list[tuple[str, str]]:
        return [("cpu.max", f"{quota_us} {period_us}")]

    def left(self, members: list[int] | None) -> list[str]:
        """Every capped axis (the group carries them all) where one of ``members`` is outside the
        run's group: a process that wrote itself into another group (root; the owner of a
        delegated subtree) runs without the caps. The members are the group's as just read and
        the live root wherever it is, so one the group does not list now is looked at alone (in
        practice a root that left: any other process that left is no member). One on its way out
        (``exiting``) is left out, as ``cgroup_v1``'s ``left`` does; every capped axis where they
        could not be read (None)."""
        if members is None or not self.capped:
            return list(self.capped)
        try:
            listed = set(self._group.member_pids())
            for pid in members:
                try:
                    if pid not in listed and not self._group.holds(pid) and not exiting(pid):
                        return list(self.capped)
                except (FileNotFoundError, ProcessLookupError):
                    continue  # gone
        except OSError:
            return list(self.capped)
        return []


def _enable(parent: str, controller: str, axis: str) -> None:
    """Make ``controller`` available in the parent's children, or say why it cannot be."""
    try:
        if controller not in cgroupfs.read_text(os.path.join(parent, "cgroup.controllers")).split():
            raise LimitUnavailable(axis, f"cgroup_v2: the {controller} controller is not delegated to {parent}")
        subtree = os.path.join(parent, "cgroup.subtree_control")
        if controller not in cgroupfs.read_text(subtree).split():
            cgroupfs.write_text(subtree, f"+{controller}")
    except OSError as exc:
        raise LimitUnavailable(
            axis, f"cgroup_v2: cannot enable the {controller} controller in {parent}: {exc.strerror}"
        ) from None
