"""The kernel's performance counters for a benchmark's run: instructions, cycles, cache and
branch figures, which the machine's load does not move, plus the software events every Linux
has (task clock, page faults, context switches).

They are opened as hyperfine's newest source and poop open them: on the calling thread of
``bench`` (``perf_event_open(pid=0, cpu=-1)``), disabled, ``enable_on_exec`` and ``inherit``,
user space only for the hardware ones, just before the run's spawn. The child the engine then
clones (into its cgroup: ``engine/spawn.py``, ``csrc/spawn.c``) inherits each counter, and its
``execve`` of the command enables the child's copy; ``bench`` itself never execs, so its own
work is never counted. Every process the command forks inherits the counter from its parent,
and each one's count is folded into ``bench``'s counter when it exits, so once the tree is gone
(after the run's teardown) one read gives the whole tree's total. The counters are opened and
closed around each command's run only: the setup, prepare, conclude and cleanup steps and the
shell's calibration are not counted, and nothing here is on ``run``'s path.

A counter the host cannot open (a virtual machine without a hardware PMU: ``ENOENT``; a
``perf_event_paranoid`` that refuses it: ``EACCES``) is None, never 0: the export writes null
and the summary says once which are missing. The syscall goes through ``ctypes`` (``libc``'s
``syscall``); no native module is needed. Counts are raw, not scaled for multiplexing (poop
and hyperfine do the same); a benchmark run has the PMU to itself more often than not.
"""

from __future__ import annotations

import errno
import os
import sys

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
# (export name, label, type, config): hyperfine's five hardware counters, then the software ones.
EVENTS = (
    ("cpu_cycles", "Cycles", PERF_TYPE_HARDWARE, 0),
    ("instructions", "Instructions", PERF_TYPE_HARDWARE, 1),
    ("cache_references", "Cache references", PERF_TYPE_HARDWARE, 2),
    ("cache_misses", "Cache misses", PERF_TYPE_HARDWARE, 3),
    ("branch_misses", "Branch misses", PERF_TYPE_HARDWARE, 5),
    ("task_clock_ns", "Task clock", PERF_TYPE_SOFTWARE, 1),
    ("page_faults", "Page faults", PERF_TYPE_SOFTWARE, 2),
    ("context_switches", "Context switches", PERF_TYPE_SOFTWARE, 3),
)
NAMES = tuple(name for name, *_ in EVENTS)
LABELS = {name: label for name, label, *_ in EVENTS}
SYSCALL = {"x86_64": 298, "aarch64": 241, "riscv64": 241, "loongarch64": 241, "ppc64le": 319, "s390x": 331}
ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: type, size, config, period, sample type, read format, flags, ...
DISABLED, INHERIT, EXCLUDE_KERNEL, EXCLUDE_HV, ENABLE_ON_EXEC = 1 << 0, 1 << 1, 1 << 5, 1 << 6, 1 << 12
PERF_FLAG_FD_CLOEXEC = 1 << 3


def attr(kind: int, config: int, flags: int = DISABLED | INHERIT | ENABLE_ON_EXEC) -> bytes:
    """A ``perf_event_attr`` (its first version's 64 bytes, native byte order)."""
    import struct

    if kind == PERF_TYPE_HARDWARE:
        flags |= EXCLUDE_KERNEL | EXCLUDE_HV  # the command's own instructions, as hyperfine counts them
    # type, size, config, sample period, sample type, read format, flags, wakeup, bp type, bp addr
    return struct.pack("=IIQQQQQIIQ", kind, ATTR_SIZE, config, 0, 0, 0, flags, 0, 0, 0)


_SYSCALL: list = []  # (the call, its number, ctypes' errno reader): libc's syscall(), prepared once


def prepare() -> bool:
    """The call made ready (the syscall's number for this machine, and ``syscall``'s argument
    types, so a call converts nothing by hand); False where this machine's number is unknown. A
    session opens three to eight counters a run: the machine's name and six ctypes values made
    for each open were a tenth of their cost. ``perf_switch`` prepares it before its fork, so
    its helper does not import ``ctypes`` again."""
    if not _SYSCALL:
        number = SYSCALL.get(os.uname().machine)  # platform.machine()'s answer, without its 1 ms import
        if number is None:
            return False
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).syscall
        call.restype = ctypes.c_long
        call.argtypes = (ctypes.c_long, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ulong)
        _SYSCALL.append((call, number, ctypes.get_errno))
    return True


def perf_event_open(attr: bytes, cpu: int = -1) -> int:
    """``perf_event_open(attr, pid=0 (this thread), cpu, group=-1, FD_CLOEXEC)``: the new
    descriptor, or minus the errno."""
    if not _SYSCALL and not prepare():
        return -errno.ENOSYS
    call, number, get_errno = _SYSCALL[0]
    fd = call(number, attr, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    return fd if fd >= 0 else -get_errno()


class Opener:
    """Opens the counters for one run at a time; finds out once which ones this host has.

    The first ``open`` also makes a keeper of each kind the host has, for the session (closed by
    ``release``): disabled, on ``bench``'s own thread, never inherited, so it counts nothing. It
    keeps the kernel's switch for that kind of event on: the first event of a kind turns it on
    and the last one's close turns it off, by patching the kernel's code, for page faults and
    context switches 50 us apiece. Without keepers each run paid that twice a counter: 150 us
    of CPU a run against 27 with them (bench/README.md), a tenth of a ``true`` run's cycle.
    Opening and closing the run's own counters around each run stays: kept open across runs,
    an inherited ``enable_on_exec`` counter lost whole runs' counts (tried, issue 49)."""

    def __init__(self) -> None:
        self._attrs = {name: attr(kind, config) for name, _, kind, config in EVENTS}
        self.missing: dict[str, str] = {}  # the counters this host refused, with why (said once)
        self._keepers: list[int] | None = None

    def open(self) -> dict[str, int | None]:
        """A descriptor per counter (None: the host lacks it), disabled until the next exec."""
        fds: dict[str, int | None] = {}
        for name in NAMES:
            fds[name] = None if name in self.missing else self._open_one(name)
        if self._keepers is None:
            self._keepers = []
            for name, _, kind, config in EVENTS:
                if fds[name] is not None:
                    fd = perf_event_open(attr(kind, config, DISABLED))
                    if fd >= 0:
                        self._keepers.append(fd)
        return fds

    def release(self) -> None:
        """The session's keepers closed (its end)."""
        keepers, self._keepers = self._keepers or [], None
        for fd in keepers:
            os.close(fd)

    def _open_one(self, name: str) -> int | None:
        fd = perf_event_open(self._attrs[name])
        if fd < 0:
            self.missing[name] = os.strerror(-fd)
            return None
        return fd

    @staticmethod
    def read(fds: dict[str, int | None]) -> dict[str, int | None]:
        """Each counter's total once the run's tree is gone, the descriptors closed."""
        counts: dict[str, int | None] = {}
        for name, fd in fds.items():
            if fd is None:
                counts[name] = None
                continue
            try:
                data = os.read(fd, 8)
                counts[name] = int.from_bytes(data, sys.byteorder) if len(data) == 8 else None
            except OSError:
                counts[name] = None
            finally:
                os.close(fd)
        return counts

    @staticmethod
    def close(fds: dict[str, int | None]) -> None:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)


def shown(counters: dict | None) -> list[tuple[str, str]]:
    """(label, mean per run) for each counter a command has figures for, in EVENTS' order."""
    if not counters:
        return []
    found = []
    for name in NAMES:
        values = counters.get(name)
        if not values:
            continue
        mean = sum(values) / len(values)
        text = f"{mean / 1e6:.3f} ms" if name == "task_clock_ns" else f"{mean:,.0f}"
        found.append((LABELS[name], f"{text} (mean per run)"))
    return found


def missing_line(missing: list[str]) -> list[str]:
    """The one line saying which counters this host lacks (null in the export, never 0)."""
    if not missing:
        return []
    return [
        "Counters this host lacks (no hardware PMU, or perf_event_paranoid): "
        + ", ".join(LABELS.get(name, name).lower() for name in missing)
        + "; null in the JSON export, never 0."
    ]
