"""Containment: one boundary per run around the child and everything it starts.

``create()`` picks a per-run cgroup v2 where the host lets us make one, else a process group.
``PROCESSKIT_CONTAINMENT=process_group`` forces the fallback (tests exercise both). Groups are
named after the run's directory (``processkit.rundir``), whose lock says whether the runner
lives, so what a killed runner left can be ended and removed (``sweep``); a process sweeps a
parent, within a bound, before its first group there (a batch, which makes many, sweeps once).

A run that asks for a cap also gets a cap layer (``limits.ControllerSet``): the controllers of
its v2 group where delegated, else cgroup v1 groups. When neither can carry every requested cap
the run fails before spawn (LimitUnavailable) instead of running uncapped. Test hooks:
``PROCESSKIT_CGROUP_PARENT`` (see ``cgroup_v2``) and ``PROCESSKIT_CGROUP_V1_ROOT`` (see
``cgroup_v1``) pointed at a directory that is not a writable cgroup simulate a host with no
usable controller.
"""

from __future__ import annotations

import os

from ..rundir import RunDir, new_token
from ..spec import MECHANISMS, Limits
from .base import ChildJoins, Container, ResourceFigures
from .errors import ContainerError, LimitUnavailable

__all__ = ["MECHANISMS", "ChildJoins", "Container", "ContainerError", "LimitUnavailable", "ResourceFigures", "create"]


def create(limits: Limits, rundir: RunDir | None = None) -> Container:
    """A fresh container for one run; raises ContainerError, or LimitUnavailable for caps.

    ``rundir`` (made first, its lock held) names the groups and keeps the process group's
    identity; without one (``doctor``'s short-lived check) nothing can prove the runner dead,
    so a group it leaves is never reaped by anyone else.
    """
    from . import prctl, sweep

    prctl.load()
    name = sweep.group_name(rundir.token if rundir is not None else new_token())
    container = _containment(name, rundir)
    if limits.requested:
        try:
            container.controllers = _controllers(container, limits, name)
        except LimitUnavailable:
            container.release()
            raise
    return container


_PARENT: list[str] = []  # the v2 parent this process found and swept, once it has


def _containment(name: str, rundir: RunDir | None) -> Container:
    if os.environ.get("PROCESSKIT_CONTAINMENT") != "process_group":
        from . import cgroup_v2

        parent = _PARENT[0] if _PARENT else cgroup_v2.find_parent()
        if parent is not None:
            if not _PARENT:
                from . import sweep

                sweep.sweep([parent], sweep.Reaped(), attempts=sweep.CREATE_ATTEMPTS, wait=False)
                _PARENT.append(parent)
            try:
                return cgroup_v2.CgroupV2(parent, name)
            except ContainerError:
                pass
    from .process_group import ProcessGroup

    return ProcessGroup(rundir)


def _controllers(container: Container, limits: Limits, name: str):
    """The first backend that can carry every requested cap: the run's v2 group, else v1.

    When both refuse, ``limit_hit`` names the axis the last resort (v1) could not carry, and
    its detail gives every backend's reason.
    """
    from . import caps_v2, cgroup_v1, cgroup_v2, sweep

    refusals = []
    if isinstance(container, cgroup_v2.CgroupV2):
        try:
            return caps_v2.CgroupV2Controllers(container, limits)
        except LimitUnavailable as exc:
            refusals.append(exc)
    sweep.sweep(cgroup_v1.own_groups().values(), sweep.Reaped(), attempts=sweep.CREATE_ATTEMPTS, wait=False)
    try:
        return cgroup_v1.CgroupV1Controllers(limits, name)
    except LimitUnavailable as exc:
        refusals.append(exc)
    raise LimitUnavailable(refusals[-1].limit, "; ".join(exc.detail for exc in refusals))
