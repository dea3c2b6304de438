"""What every containment mechanism offers the runner."""

from __future__ import annotations

import abc

from ..plain import Plain
from .accounting import Tally, Usage
from .members import LiveUsage, usage_of

TYPE_CHECKING = False
if TYPE_CHECKING:  # only the annotation: the cap layer is imported where a run asks for caps
    from .limits import ControllerSet


class ChildJoins(Plain):
    """How the root child joins its container and cap groups before exec, as data: the
    containment declares it, either spawn path carries it out (first the group, then the rest)."""

    __slots__ = ("cgroup_dir_fd", "cgroup_procs_fd", "procs_fds")

    def __init__(self, cgroup_dir_fd: int = -1, cgroup_procs_fd: int = -1, procs_fds: tuple[int, ...] = ()):
        self.cgroup_dir_fd = cgroup_dir_fd  # a cgroup v2 directory the child can be cloned straight into
        self.cgroup_procs_fd = cgroup_procs_fd  # that group's cgroup.procs, written "0" where cloning into it fails
        self.procs_fds = procs_fds  # further groups' cgroup.procs (cgroup v1 caps), written "0"


class Container(abc.ABC):
    """A run's boundary. ``controllers`` is the resource-cap layer, set by ``create()`` when the
    run asked for a cap; it is joined and released together with the container."""

    mechanism: str
    accounts = True  # the reference keeps accounting for it: the stream's summary has figures (``stream_summary``)
    live_io = False  # its figures add the live members' I/O (``usage_of``'s /proc/<pid>/io reads)
    abrupt_cleanup = "direct_child_only"
    soft_stop_scope = "whole_tree"
    _released = False
    controllers: ControllerSet | None = None

    @property
    def limit_backend(self) -> str | None:
        """Which cgroup version enforces the caps (``cgroup_v2``/``cgroup_v1``), None if uncapped."""
        return self.controllers.backend if self.controllers is not None else None

    def child_joins(self) -> ChildJoins:
        """The container's own group (if any), then the cap groups, for the spawner to join."""
        caps = self.controllers.procs_fds() if self.controllers is not None else ()
        return ChildJoins(*self._group_fds(), caps)

    def _group_fds(self) -> tuple[int, int]:
        """The mechanism's cgroup v2 group as (directory fd, ``cgroup.procs`` fd), -1 for none.

        Without one, membership is the child's own process group, which the spawner always makes.
        """
        return -1, -1

    def start_counting(self, cpu_counted: bool) -> None:
        """Called once the run's groups are all there, before the spawn: a mechanism whose
        counters served an earlier run starts this run's from here. ``cpu_counted``: the cap
        layer's groups give the CPU figures. Raises ContainerError."""

    def count_waits(self) -> None:
        """From here on ``waited_ns`` counts this run's wait for a CPU (``bench``'s samples alone:
        a read more a run that nothing else pays)."""

    def waited_ns(self) -> int | None:
        """The time the run's tree was runnable but waited for a CPU since ``count_waits``, None
        where no counter of the mechanism's holds it."""
        return None

    def cloned(self, pid: int) -> None:
        """Called in the runner as soon as the root child is cloned, before its exec is reported."""

    def adopt(self, pid: int) -> None:
        """Called in the runner once the root child exists."""

    @abc.abstractmethod
    def member_pids(self) -> list[int]:
        """Live members (may include unreaped zombies); raises OSError when unreadable."""

    @abc.abstractmethod
    def holds(self, pid: int) -> bool:
        """Whether ``pid`` is a member now: the control socket asks once its connections are past
        the members' share, so that the run's own processes hold only that share
        (control/server.py); raises ProcessLookupError or FileNotFoundError for a pid gone
        (counted as a member there), another OSError when the members cannot be read."""

    @abc.abstractmethod
    def signal_members(self, signum: int) -> None:
        """Deliver ``signum`` to every member; raises OSError on failure."""

    @abc.abstractmethod
    def kill_all(self) -> None:
        """Hard-kill every member; raises OSError on failure."""

    def usage(self, live: LiveUsage | None = None) -> Usage:
        """The tree's figures from the kernel's counters (``accounting``); None where none counts.

        Read before teardown, as the reference orders it, and again once the tree is gone
        (``final_usage``). A peak memory that no counter holds is the sum of the live members'
        high-water marks; after a natural exit nothing is left to sum, and it stays None.
        ``live``: what the members live now used, when the caller read it already (``usage_of``).
        """
        tally = Tally()
        try:
            if self.controllers is not None:
                self.controllers.account(tally)
            self._account(tally, live)
            if tally.missing("peak_memory_bytes"):
                tally.offer("peak_memory_bytes", self._summed_peak(live), "VmHWM summed over the live members")
        except (OSError, ValueError):
            return Usage(read_error=True)
        return tally.usage()

    def _summed_peak(self, live: LiveUsage | None) -> int | None:
        """The live members' high-water marks summed; None (not accounted for) where the members
        cannot all be read: a part of them would be a smaller peak than the tree's, and the
        counters read meanwhile are kept, not thrown away with it."""
        if live is None:
            try:
                live = usage_of(self.member_pids(), io=False)
            except OSError:
                return None
        return live.peak_memory_bytes

    def final_usage(self, read: Usage) -> Usage:
        """The figures again once the tree is gone (before ``release``): what members did until
        they were killed at teardown is in; a figure only the earlier read had (the live
        members' sum) is kept from ``read``."""
        final = self.usage()
        if final.read_error:
            return read
        for field, source in read.sources.items():
            if getattr(final, field) is None:
                setattr(final, field, getattr(read, field))
                final.sources[field] = source
        return final

    def _account(self, tally: Tally, live: LiveUsage | None = None) -> None:
        """Give the figures the mechanism itself counts (``live``: ``usage``'s); raises OSError on a failed read."""

    def limit_evidence(self, members: list[int] | None) -> dict[str, str]:
        """Per axis, whether a cap engaged: ``tripped``, ``not_tripped`` or ``unknown``: a capped
        axis a member of the run is outside of (``ControllerSet.left``: a root process that
        wrote itself out of its run's v1 group) is ``unknown``, not ``not_tripped``, as the cap
        did not hold it. ``members``: the members as just read (None: they could not be read,
        and each such axis is ``unknown``)."""
        if self.controllers is None:
            return {"memory": "unknown", "processes": "unknown", "cpu": "unknown"}
        verdicts = self.controllers.evidence()
        for axis in self.controllers.left(members):
            if verdicts[axis] == "not_tripped":
                verdicts[axis] = "unknown"
        return verdicts

    def release(self) -> None:
        """Remove whatever the container and its cap layer created on the host. Idempotent: a
        run that failed half way through its release is released again by its last resort."""
        if self._released:
            return
        self._released = True
        self._remove()
        if self.controllers is not None:
            self.controllers.release()

    def remaining(self) -> list[str]:
        """The groups made for this run alone that are still on the host: none once ``release``
        removed them; one its release could not remove (or never reached) stays listed, so the
        run's directory, the evidence a sweep needs to end it, is kept (``rundir.RunDir.close``)."""
        left = self._remaining()
        return left + self.controllers.remaining() if self.controllers is not None else left

    def _remaining(self) -> list[str]:
        """The mechanism's own groups not removed yet."""
        return []

    def _remove(self) -> None:
        """Remove what the mechanism itself created."""
