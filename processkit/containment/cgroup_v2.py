"""Per-run cgroup v2 containment: membership from before exec, ``cgroup.kill`` for teardown.

The child writes itself into ``cgroup.procs`` between fork and exec, so nothing it starts can
be outside the group; ``setsid`` and double forks do not leave a cgroup.
"""

from __future__ import annotations

import errno
import os
import signal
import time

from .base import Container, ContainerError, ResourceSummary

_MOUNTINFO = "/proc/self/mountinfo"


def find_parent() -> str | None:
    """The cgroup2 directory this runner lives in, where a run's group is created."""
    override = os.environ.get("PROCESSKIT_CGROUP_PARENT")
    if override:
        return override
    mount = None
    try:
        with open(_MOUNTINFO) as handle:
            for line in handle:
                fields = line.split()
                fstype = fields[fields.index("-") + 1]
                if fstype == "cgroup2":
                    mount = fields[4]
                    break
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
            os.mkdir(self.path, 0o755)
            self._procs_fd = os.open(os.path.join(self.path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            self._remove_dir()
            raise ContainerError(f"cannot create cgroup {self.path}: {exc.strerror}") from exc

    def prepare_child(self) -> None:
        os.write(self._procs_fd, b"0")

    def _read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as handle:
            return handle.read()

    def member_pids(self) -> list[int]:
        return [int(line) for line in self._read("cgroup.procs").split()]

    def populated(self) -> bool:
        for line in self._read("cgroup.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "populated":
                return value.strip() == "1"
        return bool(self.member_pids())

    def signal_members(self, signum: int) -> None:
        for pid in self.member_pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def kill_all(self) -> None:
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w") as handle:
                handle.write("1")
        except FileNotFoundError:  # kernels before 5.14: kill member by member
            self.signal_members(signal.SIGKILL)

    def resource_summary(self) -> ResourceSummary:
        try:
            stat = dict(line.split() for line in self._read("cpu.stat").splitlines() if line.strip())
        except (OSError, ValueError):
            return ResourceSummary(read_error=True)
        usage = stat.get("usage_usec")
        return ResourceSummary(total_cpu_ms=int(usage) // 1000 if usage is not None else None)

    def release(self) -> None:
        os.close(self._procs_fd)
        self._remove_dir()

    def _remove_dir(self) -> None:
        # Removal can briefly fail with EBUSY while the kernel finishes exiting members.
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return
                time.sleep(0.01)
