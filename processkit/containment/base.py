"""What every containment mechanism offers the runner."""

from __future__ import annotations

import abc

from ..plain import Plain
from .members import usage_of

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


class ResourceSummary(Plain):
    __slots__ = (
        "read_error",
        "peak_memory_bytes",
        "total_cpu_ms",
        "io_read_bytes",
        "io_write_bytes",
        "peak_process_count",
    )

    def __init__(
        self,
        read_error: bool = False,
        peak_memory_bytes: int | None = None,
        total_cpu_ms: int | None = None,
        io_read_bytes: int | None = None,
        io_write_bytes: int | None = None,
        peak_process_count: int | None = None,
    ):
        self.read_error = read_error
        self.peak_memory_bytes = peak_memory_bytes
        self.total_cpu_ms = total_cpu_ms
        self.io_read_bytes = io_read_bytes
        self.io_write_bytes = io_write_bytes
        self.peak_process_count = peak_process_count


class Container(abc.ABC):
    """A run's boundary. ``controllers`` is the resource-cap layer, set by ``create()`` when the
    run asked for a cap; it is joined and released together with the container."""

    mechanism: str
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

    def adopt(self, pid: int) -> None:
        """Called in the runner once the root child exists."""

    @abc.abstractmethod
    def member_pids(self) -> list[int]:
        """Live members (may include unreaped zombies); raises OSError when unreadable."""

    @abc.abstractmethod
    def signal_members(self, signum: int) -> None:
        """Deliver ``signum`` to every member; raises OSError on failure."""

    @abc.abstractmethod
    def kill_all(self) -> None:
        """Hard-kill every member; raises OSError on failure."""

    def resource_summary(self) -> ResourceSummary:
        """The tree's figures from the kernel's counters; null where nothing measures them.

        Memory and CPU that no counter holds (no ``memory.peak``, no CPU accounting) are summed
        over the members alive at the read point, as the reference does. The summary is read
        before teardown, so on a forced ending (timeout, cancel, kill, overflow) the tree is
        still there to measure; after a natural exit usually nothing is left, and they stay
        null. A cgroup's ``cpu.stat`` is always kept: it covers members that already exited.
        """
        try:
            measured = self._accounting()
            if self.controllers is not None:
                measured.update((k, v) for k, v in self.controllers.accounting().items() if v is not None)
            if measured.get("peak_memory_bytes") is None or measured.get("total_cpu_ms") is None:
                live = usage_of(self.member_pids())
                for key, value in live._asdict().items():
                    if measured.get(key) is None:
                        measured[key] = value
        except (OSError, ValueError):
            return ResourceSummary(read_error=True)
        return ResourceSummary(**measured)  # type: ignore[arg-type]  # its keys name the int fields

    def _accounting(self) -> dict[str, int | None]:
        """ResourceSummary fields the mechanism itself measures; raises OSError on a failed read."""
        return {}

    def limit_evidence(self) -> dict[str, str]:
        """Per axis, whether a cap engaged: ``tripped``, ``not_tripped`` or ``unknown``."""
        if self.controllers is None:
            return {"memory": "unknown", "processes": "unknown", "cpu": "unknown"}
        return self.controllers.evidence()

    def release(self) -> None:
        """Remove whatever the container and its cap layer created on the host. Idempotent: a
        run that failed half way through its release is released again by its last resort."""
        if self._released:
            return
        self._released = True
        self._remove()
        if self.controllers is not None:
            self.controllers.release()

    def _remove(self) -> None:
        """Remove what the mechanism itself created."""
