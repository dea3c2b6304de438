"""Containment: one boundary per run around the child and everything it starts.

``create()`` picks a per-run cgroup v2 where the host lets us make one, else a process group.
``PROCESSKIT_CONTAINMENT=process_group`` forces the fallback (tests exercise both).
"""

from __future__ import annotations

import os

from ..spec import Limits
from .base import Container, ContainerError, LimitUnavailable, ResourceSummary

__all__ = ["Container", "ContainerError", "LimitUnavailable", "ResourceSummary", "create"]


def create(run_token: str, limits: Limits) -> Container:
    """A fresh container for one run; raises ContainerError, or LimitUnavailable for caps."""
    from . import prctl

    prctl.load()
    if limits.requested:
        axis = "memory" if limits.max_memory is not None else "processes" if limits.max_processes is not None else "cpu"
        raise LimitUnavailable(axis, "no writable resource controller for this run")
    if os.environ.get("PROCESSKIT_CONTAINMENT") != "process_group":
        from . import cgroup_v2

        parent = cgroup_v2.find_parent()
        if parent is not None:
            try:
                return cgroup_v2.CgroupV2(parent, f"processkit-{run_token}")
            except ContainerError:
                pass
    from .process_group import ProcessGroup

    return ProcessGroup()
