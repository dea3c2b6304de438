"""Per-run cgroup v2 containment: membership from before exec, ``cgroup.kill`` for teardown.

The child is cloned straight into the group (``CLONE_INTO_CGROUP``) or writes itself into
``cgroup.procs`` between fork and exec, so nothing it starts can be outside the group; ``setsid``
and double forks do not leave a cgroup. Where the host delegates the memory, pids and cpu
controllers, the same group also carries the run's caps (``caps_v2``, imported by runs with caps).

``PROCESSKIT_CGROUP_PARENT=<dir>`` replaces discovery of the parent group; a directory that is
not a writable cgroup2 group makes runs fall back to a process group (and caps to cgroup v1).
"""

from __future__ import annotations

import os

from .. import signum as signals
from . import cgroupfs
from .base import Container
from .errors import ContainerError


def find_parent() -> str | None:
    """The cgroup2 directory this runner lives in, where a run's group is created."""
    override = os.environ.get("PROCESSKIT_CGROUP_PARENT")
    if override:
        return override
    try:
        mount = next((mount.mount_point for mount in cgroupfs.mounts() if mount.fstype == "cgroup2"), None)
        if mount is None:
            return None
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                if line.startswith("0::"):
                    own = line[3:].strip()
                    return os.path.join(mount, own.lstrip("/"))
    except OSError:
        return None
    return mount


class CgroupV2(Container):
    mechanism = "cgroup_v2"

    def __init__(self, parent: str, name: str):
        self.path = os.path.join(parent, name)
        try:
            self._procs_fd = cgroupfs.make_group(self.path)
        except OSError as exc:
            raise ContainerError(f"cannot create cgroup {self.path}: {exc.strerror}") from exc
        try:
            self._dir_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self._dir_fd = -1  # the child then joins through cgroup.procs alone

    def _group_fds(self) -> tuple[int, int]:
        return self._dir_fd, self._procs_fd

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def member_pids(self) -> list[int]:
        return cgroupfs.member_pids(self.path)

    def signal_members(self, signum: int) -> None:
        for pid in self.member_pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def kill_all(self) -> None:
        try:
            cgroupfs.write_text(self._file("cgroup.kill"), "1")
        except FileNotFoundError:  # kernels before 5.14: kill member by member
            self.signal_members(signals.SIGKILL)

    def _accounting(self) -> dict[str, int | None]:
        """``cpu.stat`` always exists; the peaks and ``io.stat`` only where their controller is on."""
        usage_usec = cgroupfs.read_keyed(self._file("cpu.stat")).get("usage_usec")
        measured = {
            "total_cpu_ms": usage_usec // 1000 if usage_usec is not None else None,
            "peak_memory_bytes": cgroupfs.read_optional_int(self._file("memory.peak")),
            "peak_process_count": cgroupfs.read_optional_int(self._file("pids.peak")),
        }
        try:
            io_lines = cgroupfs.read_text(self._file("io.stat")).splitlines()
        except FileNotFoundError:
            return measured
        # One line per device: "MAJ:MIN rbytes=N wbytes=N rios=N ..."
        counters = [dict(item.split("=", 1) for item in line.split()[1:]) for line in io_lines if line.strip()]
        measured["io_read_bytes"] = sum(int(c.get("rbytes", 0)) for c in counters)
        measured["io_write_bytes"] = sum(int(c.get("wbytes", 0)) for c in counters)
        return measured

    def _remove(self) -> None:
        os.close(self._procs_fd)
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
        cgroupfs.remove_group(self.path)
