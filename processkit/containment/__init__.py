"""Containment: one boundary per run around the child and everything it starts.

``create()`` picks a per-run cgroup v2 where the host lets us make one, else a process group.
``PROCESSKIT_CONTAINMENT=process_group`` forces the fallback (tests exercise both). Groups are
named after the run's directory (``processkit.rundir``), whose lock says whether the runner
lives, so what a killed runner left can be ended and removed (``sweep``); a process sweeps a
parent, within a bound, before its first group there (a batch, which makes many, sweeps once).

Every run also gets accounting (``accounting``): the controllers its v2 parent offers are
switched on, and accounting-only groups are made in the v1 hierarchies, as for caps.

A run that asks for a cap also gets a cap layer (``limits.ControllerSet``): the controllers of
its v2 group where delegated, else cgroup v1 groups. When neither can carry every requested cap
the run fails before spawn (LimitUnavailable) instead of running uncapped. Test hooks:
``PROCESSKIT_CGROUP_PARENT`` (see ``cgroup_v2``) and ``PROCESSKIT_CGROUP_V1_ROOT`` (see
``cgroup_v1``) pointed at a directory that is not a writable cgroup simulate a host with no
usable controller.
"""

from __future__ import annotations

import _thread  # built in: ``threading`` would cost every run's start-up its import
import os

from .. import envvars, mountinfo
from ..rundir import RunDir, new_token
from ..spec import MECHANISMS, NO_LIMITS, Limits
from . import accounting, cgroupfs, prctl  # (loaded with ``base`` and the spawn either way)
from .accounting import Usage
from .base import ChildJoins, Container
from .errors import ContainerError, LimitUnavailable, OutOfDescriptors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .pool import Pool

__all__ = [
    "MECHANISMS",
    "ChildJoins",
    "Container",
    "ContainerError",
    "OutOfDescriptors",
    "LimitUnavailable",
    "Usage",
    "create",
    "restart_ahead",
    "restart_idle",
]


def has_children() -> bool:
    """Whether this process (its runs' subreaper) has any child at all, live or not: the usual
    answer, no, costs one ``waitid`` and loads nothing (``leftovers`` is for when it has)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def may_have_escapees() -> bool:
    """Whether anything can have outlived a run's boundary into this process's care: it became
    its runs' subreaper and has a child. No, the usual answer, loads nothing (``escaped`` is
    for the rest)."""
    return prctl.made_subreaper() and has_children()


def create(limits: Limits, rundir: RunDir | None = None, adopt_orphans: bool = True) -> Container:
    """A fresh container for one run; raises ContainerError, or LimitUnavailable for caps.

    ``rundir`` (made first, its lock held) names the groups and keeps the process group's
    identity; without one (``doctor``'s short-lived check) nothing can prove the runner dead,
    so a group it leaves is never reaped by anyone else. ``adopt_orphans``: the run makes this
    process a subreaper (a process the runner owns; not a caller's), whatever its mechanism: a
    member that leaves the boundary (``setsid`` out of a process group, a write of its pid into
    another cgroup's ``cgroup.procs``) then comes to it once orphaned, where it is found
    (``leftovers``), not to init.
    """
    import processkit.containment.cgroup_v1 as cgroup_v1  # (a function's import: ``_lender`` says why this form)

    foreign = mountinfo.foreign_proc()  # every member read and kill rests on /proc's pids being ours
    if foreign is not None:
        raise ContainerError(foreign)
    prctl.load()
    if adopt_orphans:
        prctl.set_child_subreaper()  # before the spawn: the run's orphans come here from its start
        prctl.set_not_dumpable()  # before the spawn: no child reads this process's environment or memory
    name = cgroupfs.group_name(rundir.token if rundir is not None else new_token())
    capped = limits.requested
    accounted = accounting.enabled()
    v1_parents = cgroup_v1.own_groups() if capped or accounted else {}
    lender = None if capped else _lender(rundir)  # a capped run's groups are its own
    container = _containment(name, rundir, v1_parents, lender, accounted)
    try:  # from here on, whatever fails releases what ``_containment`` made (a process group's open share)
        if rundir is not None:  # its directory stays while a group of the run's remains (``RunDir.close``)
            rundir.speaks_for(container)
        if capped:
            container.controllers = _controllers(container, limits, name, v1_parents)
        elif v1_parents:  # accounting only: never fails a run (nothing must succeed without a cap)
            container.controllers = cgroup_v1.CgroupV1Controllers(NO_LIMITS, name, v1_parents, lender)
        v1 = container.controllers
        if rundir is not None and isinstance(v1, cgroup_v1.CgroupV1Controllers) and v1.paths:
            rundir.record_groups(v1.paths)  # (a lent group is recorded by its pool)
        container.start_counting(cpu_counted=isinstance(v1, cgroup_v1.CgroupV1Controllers) and v1.counts_cpu())
    except BaseException:  # a ContainerError (LimitUnavailable too), or any other: nothing made is left held
        container.release()
        raise
    return container


def restart_ahead(rundir: RunDir | None) -> None:
    """A lodged host's idle groups started again for its next run (``pool.Pool.restart_ahead``),
    best effort: what fails here is tried again, or made fresh, when the next run takes it."""
    _restart(_lender(rundir))


def restart_idle(home: RunDir | None) -> None:
    """``restart_ahead`` for a lodged host between two runs, given its directory (the API's
    service, once it has replied to a call: the groups that call's run gave back are checked
    and started again while its caller reads the reply, not when the next call takes them,
    whose ``take`` then only looks that each is still empty). Nothing is made for a host whose
    runs took no group."""
    if home is None:
        return
    import processkit.containment.pool as pool

    lender = pool.held_by(home)
    if lender is not None:
        # Called so after every reply: the groups a later run gives back are looked at here
        # too, after its reply rather than in the release its caller waits through.
        lender.settle_later()
    _restart(lender)


def _restart(lender: Pool | None) -> None:
    """A pool's idle groups started again, best effort (``restart_ahead``, ``restart_idle``)."""
    if lender is not None:
        try:
            lender.restart_ahead()
        except OSError:
            pass


def _lender(rundir: RunDir | None) -> Pool | None:
    """``pool.of``, whose module (and ``lent``) is imported only for a lodged host's job slot:
    a run with a directory of its own lends nothing, and a plain ``run`` loads neither."""
    if getattr(rundir, "home", None) is None:
        return None
    # ``import a.b as b``, not ``from . import b``: the same lazy import, but the second runs
    # importlib's Python code again at every call (about 2 µs against 0.7; a batch makes each
    # of this module's imports once or twice a job).
    import processkit.containment.pool as pool

    return pool.of(rundir)


_V2_PARENT: list[str] = []  # the v2 parent this process found, once it has: as found, then normalised
_SWEPT: set[str] = set()  # the parents this process has swept (a batch, which makes many groups, sweeps once)
_REVISIT: dict[str, float] = {}  # swept parents where a run was left for its grace: when to look again
_REVISIT_LOCK = _thread.allocate_lock()  # a Dask worker's chunks run side by side in one process
V2_PARENTS: set[str] = set()  # where this process's runs were given cgroup v2 groups (``leftovers.v2_keeps``)
# This process's own v2 group as it first looked for its runs' parent, before its first run
# (``leftovers.v2_keeps``): a run's process (root) may move the runner itself later, so where it
# is at the sweep tells nothing.
V2_OWN: list[str | None] = []


def _due() -> set[str]:
    """The parents whose sweep left a run for its grace, now over: taken out, to be swept again
    (a long-lived process, which sweeps each parent once, would otherwise leave that run's tree
    for its whole life)."""
    import time

    now = time.monotonic()
    with _REVISIT_LOCK:
        due = {where for where, when in _REVISIT.items() if when <= now}
        for where in due:
            del _REVISIT[where]
    return due


def _containment(
    name: str, rundir: RunDir | None, v1_parents: dict[str, str], lender: Pool | None, accounted: bool
) -> Container:
    """The run's boundary, after one bounded sweep of every parent its groups are made in (the
    first time this process makes a group there: a run after it only looks that it was)."""
    parent = None
    if envvars.get("PROCESSKIT_CONTAINMENT") != "process_group":
        import processkit.containment.cgroup_v2 as cgroup_v2

        if _V2_PARENT:
            parent = _V2_PARENT[0]
        else:
            parent, own = cgroup_v2.parent_and_own()
            if parent is not None:
                _V2_PARENT[:] = parent, os.path.normpath(parent)  # normalised once a process
                V2_OWN.append(own)  # before any sweep or spawn: no run's process has moved it yet
    unswept: set = {parent, *v1_parents.values()} - _SWEPT - {None}  # (``set``: None is taken out)
    if _REVISIT:
        unswept |= _due()
    if unswept:
        import processkit.containment.sweep as sweep

        reaped = sweep.Reaped()
        sweep.sweep(list(unswept), reaped, attempts=sweep.CREATE_ATTEMPTS, wait=False, grace=sweep.DEAD_GRACE_SECONDS)
        _SWEPT.update(unswept)
        if reaped.graced is not None:
            with _REVISIT_LOCK:
                _REVISIT.update(dict.fromkeys(unswept, reaped.graced))
    if parent is not None:
        try:
            group = cgroup_v2.CgroupV2(parent, name, lender)
        except ContainerError:
            pass
        else:
            if accounted:
                cgroup_v2.enable_accounting(parent)
            V2_PARENTS.add(_V2_PARENT[1])  # one a process: no record grows a run
            return group
    from .process_group import ProcessGroup

    return ProcessGroup(rundir)


def _controllers(container: Container, limits: Limits, name: str, v1_parents: dict[str, str]):
    """The first backend that can carry every requested cap: the run's v2 group, else v1.

    When both refuse, ``limit_hit`` names the axis the last resort (v1) could not carry, and
    its detail gives every backend's reason.
    """
    from . import caps_v2, cgroup_v1, cgroup_v2

    refusals = []
    if isinstance(container, cgroup_v2.CgroupV2):
        try:
            return caps_v2.CgroupV2Controllers(container, limits)
        except LimitUnavailable as exc:
            refusals.append(exc)
    try:
        return cgroup_v1.CgroupV1Controllers(limits, name, v1_parents)
    except LimitUnavailable as exc:
        refusals.append(exc)
    raise LimitUnavailable(refusals[-1].limit, "; ".join(exc.detail for exc in refusals))
