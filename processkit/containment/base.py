"""What every containment mechanism offers the runner."""

from __future__ import annotations

import abc
import dataclasses


class ContainerError(Exception):
    """The container could not be created or joined (exit 102)."""


class LimitUnavailable(ContainerError):
    """A requested resource cap cannot be enforced here (``limit_hit``, then exit 102)."""

    def __init__(self, limit: str, detail: str):
        super().__init__(f"cannot enforce the {limit} limit: {detail}")
        self.limit = limit
        self.detail = detail


@dataclasses.dataclass
class ResourceSummary:
    read_error: bool = False
    peak_memory_bytes: int | None = None
    total_cpu_ms: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None
    peak_process_count: int | None = None


class Container(abc.ABC):
    mechanism: str
    abrupt_cleanup = "direct_child_only"
    soft_stop_scope = "whole_tree"

    @abc.abstractmethod
    def prepare_child(self) -> None:
        """Runs in the forked child before exec: join the container."""

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
        """What this mechanism accounts for; all-null by default (never a made-up 0)."""
        return ResourceSummary()

    def limit_evidence(self) -> dict[str, str]:
        """Per capped axis, whether the cap was hit: ``tripped``, ``not_tripped`` or ``unknown``."""
        return {"memory": "unknown", "processes": "unknown", "cpu": "unknown"}

    def release(self) -> None:
        """Remove whatever the container created on the host."""
