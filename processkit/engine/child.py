"""The started root child (``Child``), either spawn's, and the refusal of a step in its start
(``Refused``): apart from ``engine/spawn.py`` so that the Popen fallback's module
(``engine/spawn_popen.py``), which a run on the native spawn never loads, builds on them too."""

from __future__ import annotations

import os

from .. import rusage
from ..containment.accounting import ChildrenUsage


class Refused(Exception):
    """A step in the child failed: ``step`` is ``attach``, ``cwd`` or ``start``."""

    def __init__(self, step: str, reason: str, number: int = 0):
        super().__init__(reason)
        self.step = step
        self.reason = reason
        self.number = number  # its errno, 0 when no OS call refused


class Child:
    """The started root child. The runner owns its fds: the runner's ends of the child's stdin,
    stdout and stderr pipes (None where not piped) and a pidfd (None where the kernel gave none)."""

    def __init__(self, pid: int, pipes: list[int | None], pidfd: int | None = None):
        self.pid = pid
        self.stdin, self.stdout, self.stderr = pipes
        self.pidfd = pidfd
        self.returncode: int | None = None
        self.max_rss_bytes: int | None = None  # the root's ru_maxrss as wait4 reports it, once reaped
        self.root_cpu_ns: tuple[int, int] | None = None  # the root's (user, system) as wait4 reports them, once reaped
        # The native spawn's child's first moment, plus the time it spent joining cgroups by write
        # (the containment's waits, not the command's): where bench's timed interval starts.
        # None from the Popen fallback.
        self.command_from_ns: int | None = None

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal) once reaped, else None."""
        if self.returncode is None:
            self._reaped(*rusage.wait4(self.pid, os.WNOHANG))
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._reaped(*rusage.wait4(self.pid, 0))
        assert self.returncode is not None, "wait4 without WNOHANG returns the child"
        return self.returncode

    def _reaped(self, pid: int, status: int, max_rss_kib: int, user_ns: int, system_ns: int) -> None:
        """``wait4``'s answer: ``wait4`` rather than ``waitpid`` for its rusage, whose
        ``ru_maxrss`` (KiB) is the largest resident set of the root and of every descendant
        reaped below it, and whose CPU times are the root's and those of the descendants it
        waited for (what ``/usr/bin/time`` and hyperfine report): ``bench``'s
        ``memory_usage_byte``, ``user`` and ``system``. The root leads its run's process group:
        a run counted by this process's reaped children (``ChildrenUsage``) keeps its figures
        from its own root alone."""
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)
            self.max_rss_bytes = max_rss_kib * 1024
            self.root_cpu_ns = user_ns, system_ns
            ChildrenUsage.reaped(pid)
