"""When the run's root exited, by the kernel's clock: the end of ``bench``'s timed interval.

hyperfine blocks in ``wait4`` the moment its child is spawned, so it wakes when the child
exits. ``bench`` carries each run on the engine's loop, which after the spawn still sets the
run up (its events, its output pumps, its timers) before it waits: a tiny command (``true``)
has exited long before, and on a busy host ``bench`` (always running, never sleeping) waits
its turn for a CPU first. Timed by when the loop noticed, ``-N true`` read 1.2 to 4 times
hyperfine's mean in the same minute.

So the kernel is asked: a perf ``dummy`` event on ``bench``'s thread with ``task`` set,
inherited by the run's tree, writes a ``PERF_RECORD_FORK`` and a ``PERF_RECORD_EXIT`` for each
of its processes into a ring buffer, stamped with ``CLOCK_MONOTONIC`` (``use_clockid``), the
clock the interval starts on. The root is the process forked from ``bench``; its exit record's
time is when it exited. The kernel refuses to map an inherited per-task event counting on any
CPU, so there is one event per CPU ``bench`` may run on (the tree inherits that set). Where
perf is not available, or a record was lost, the run keeps the time the loop noticed the exit.
"""

from __future__ import annotations

import mmap
import os
import struct
import time

from .counters import perf_event_open

PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY = 1, 9
INHERIT, EXCLUDE_KERNEL, TASK, USE_CLOCKID = 1 << 1, 1 << 5, 1 << 13, 1 << 25
ATTR_SIZE = 96  # PERF_ATTR_SIZE_VER3: up to clockid
RECORD_EXIT, RECORD_FORK = 4, 7
DATA_PAGES = 8  # 32 KiB a CPU: a FORK and an EXIT record (40 bytes each) for hundreds of processes
HEAD_AT, DATA_AT = 1024, 1040  # perf_event_mmap_page: data_head; data_offset and data_size


def _attr() -> bytes:
    flags = INHERIT | EXCLUDE_KERNEL | TASK | USE_CLOCKID
    # type, size, config, period, sample type, read format, flags, wakeup, bp type, bp addr,
    # config2, branch sample type, regs user, stack user, clockid
    packed = struct.pack(
        "=IIQQQQQIIQQQQIi", PERF_TYPE_SOFTWARE, ATTR_SIZE, PERF_COUNT_SW_DUMMY, 0, 0, 0, flags, 0, 0, 0, 0, 0, 0, 0,
        time.CLOCK_MONOTONIC,
    )  # fmt: skip
    return packed + bytes(ATTR_SIZE - len(packed))


class ExitClock:
    """Opened just before a run's spawn, read once its tree is gone."""

    def __init__(self) -> None:
        self.unavailable: str | None = None  # why the kernel's exit time cannot be had, once known
        self._attr = _attr()
        self._size = mmap.PAGESIZE * (1 + DATA_PAGES)

    def open(self) -> list[tuple[int, mmap.mmap]] | None:
        if self.unavailable is not None:
            return None
        opened: list[tuple[int, mmap.mmap]] = []
        try:
            for cpu in sorted(os.sched_getaffinity(0)):
                fd = perf_event_open(self._attr, cpu)
                if fd < 0:
                    raise OSError(-fd, os.strerror(-fd))
                try:
                    opened.append((fd, mmap.mmap(fd, self._size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)))
                except OSError:
                    os.close(fd)
                    raise
        except OSError as exc:
            self.unavailable = exc.strerror or str(exc)
            self.close(opened)
            return None
        return opened

    @staticmethod
    def close(opened: list[tuple[int, mmap.mmap]] | None) -> None:
        for fd, ring in opened or ():
            ring.close()
            os.close(fd)

    def read(self, opened: list[tuple[int, mmap.mmap]] | None) -> int | None:
        """The root's exit (monotonic ns), or None; the events closed."""
        if opened is None:
            return None
        try:
            forks, exits = {}, {}
            for _, ring in opened:
                for kind, pid, ppid, tid, stamp in _records(ring):
                    if kind == RECORD_FORK and pid == tid:
                        forks[pid] = ppid
                    elif kind == RECORD_EXIT and pid == tid:
                        exits[pid] = stamp
            me = os.getpid()
            roots = [pid for pid, parent in forks.items() if parent == me]
            return exits.get(roots[0]) if len(roots) == 1 else None
        finally:
            self.close(opened)


def _records(ring: mmap.mmap):
    """(type, pid, ppid, tid, time) of each FORK and EXIT record in one CPU's ring; nothing if
    the ring wrapped (its oldest records are gone)."""
    (head,) = struct.unpack_from("=Q", ring, HEAD_AT)
    offset, size = struct.unpack_from("=QQ", ring, DATA_AT)
    if head > size:
        return
    position = 0
    while position + 8 <= head:
        kind, _, length = struct.unpack_from("=IHH", ring, offset + position)
        if length < 8:
            return
        if kind in (RECORD_FORK, RECORD_EXIT) and length >= 32:
            pid, ppid, tid, _, stamp = struct.unpack_from("=IIIIQ", ring, offset + position + 8)
            yield kind, pid, ppid, tid, stamp
        position += length
