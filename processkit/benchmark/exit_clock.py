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

The events and their rings are the session's, opened at its first run and closed with it:
opening, mapping and closing them for every run cost about as much as a ``true`` run's own
exit-to-reap (0.1-0.2 ms wall a run, bench/README.md). Each run consumes its records: ``open``
skips whatever the rings hold (what ran between two runs), ``read`` takes what its run's tree
wrote and hands the space back (``data_tail``), so a ring never fills across runs; one that
filled within a run (a ``PERF_RECORD_LOST``) gives no time, as a wrapped one did, and a run
that got no time has the events made anew for the next.
"""

from __future__ import annotations

import mmap
import os
import struct
import time

from .counters import EXCLUDE_KERNEL, INHERIT, PERF_TYPE_SOFTWARE, perf_event_open

PERF_COUNT_SW_DUMMY = 9
TASK, USE_CLOCKID = 1 << 13, 1 << 25
ATTR_SIZE = 96  # PERF_ATTR_SIZE_VER3: up to clockid
RECORD_LOST, RECORD_EXIT, RECORD_FORK = 2, 4, 7
DATA_PAGES = 8  # 32 KiB a CPU: a FORK and an EXIT record (40 bytes each) for hundreds of processes
HEAD_AT, TAIL_AT, DATA_AT = 1024, 1032, 1040  # perf_event_mmap_page: data_head, data_tail; data_offset and data_size


def _attr() -> bytes:
    flags = INHERIT | EXCLUDE_KERNEL | TASK | USE_CLOCKID
    # type, size, config, period, sample type, read format, flags, wakeup, bp type, bp addr,
    # config2, branch sample type, regs user, stack user, clockid
    packed = struct.pack(
        "=IIQQQQQIIQQQQIi", PERF_TYPE_SOFTWARE, ATTR_SIZE, PERF_COUNT_SW_DUMMY, 0, 0, 0, flags, 0, 0, 0, 0, 0, 0, 0,
        time.CLOCK_MONOTONIC,
    )  # fmt: skip
    return packed + bytes(ATTR_SIZE - len(packed))


Rings = list[tuple[int, mmap.mmap]]


class ExitClock:
    """The session's events: ``open`` just before a run's spawn, ``read`` once its tree is gone,
    ``close`` at the session's end."""

    def __init__(self) -> None:
        self.unavailable: str | None = None  # why the kernel's exit time cannot be had, once known
        self._attr = _attr()
        self._size = mmap.PAGESIZE * (1 + DATA_PAGES)
        self._rings: Rings = []
        self._cpus: list[int] = []  # the CPUs the rings watch: bench's affinity when they were made
        self._pid = os.getpid()  # the roots' parent, read once: ``getpid`` is a system call each time

    def open(self) -> Rings | None:
        """The rings, emptied of what they held: the next run's records start here."""
        if self.unavailable is not None:
            return None
        cpus = sorted(os.sched_getaffinity(0))
        if cpus != self._cpus:
            self.close()
            self._cpus, self._rings = cpus, self._made(cpus)
            if not self._rings:
                return None
        for _, ring in self._rings:
            _skip(ring)
        return self._rings

    def _made(self, cpus: list[int]) -> Rings:
        opened: Rings = []
        try:
            for cpu in cpus:
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
            _closed(opened)
            return []
        return opened

    def close(self) -> None:
        """The events gone (the session's end, or bench's CPUs changed)."""
        rings, self._rings, self._cpus = self._rings, [], []
        _closed(rings)

    def read(self, opened: Rings | None) -> int | None:
        """The root's exit (monotonic ns), or None; the run's records consumed."""
        if opened is None:
            return None
        forks, exits = {}, {}
        lost = False
        for _, ring in opened:
            for kind, pid, ppid, tid, stamp in _consume(ring):
                if kind == RECORD_LOST:
                    lost = True
                elif kind == RECORD_FORK and pid == tid:
                    forks[pid] = ppid
                elif kind == RECORD_EXIT and pid == tid:
                    exits[pid] = stamp
        roots = [pid for pid, parent in forks.items() if parent == self._pid]
        exited = exits.get(roots[0]) if len(roots) == 1 and not lost else None
        if exited is None:
            self.close()  # made again for the next run: a ring that missed this one is not trusted
        return exited


def _closed(rings: Rings) -> None:
    for fd, ring in rings:
        ring.close()
        os.close(fd)


HEAD, BOUNDS = struct.Struct("=Q"), struct.Struct("=QQQ")  # data_head; data_tail, data_offset, data_size
HEADER, FIELDS = struct.Struct("=IHH"), struct.Struct("=IIIIQ")  # type, misc, size; pid, ppid, tid, ptid, time


def _skip(ring: mmap.mmap) -> None:
    """What the ring holds left unread: its tail moved to its head (nothing decoded)."""
    HEAD.pack_into(ring, TAIL_AT, HEAD.unpack_from(ring, HEAD_AT)[0])


def _consume(ring: mmap.mmap) -> list[tuple[int, int, int, int, int]]:
    """(type, pid, ppid, tid, time) of each FORK and EXIT record (a LOST one as type alone) in
    one CPU's ring since its tail, which then moves to the head: the kernel may write there again."""
    (head,) = HEAD.unpack_from(ring, HEAD_AT)
    tail, offset, size = BOUNDS.unpack_from(ring, TAIL_AT)
    found = []
    position = tail
    while position + 8 <= head:
        start = position % size
        if start + 32 <= size:  # the whole record before the ring's end: read in place
            kind, _, length = HEADER.unpack_from(ring, offset + start)
            fields: tuple[mmap.mmap | bytes, int] = (ring, offset + start + 8)
        else:
            kind, _, length = HEADER.unpack_from(_bytes(ring, offset, size, position, 8))
            fields = (_bytes(ring, offset, size, position + 8, 24), 0)
        if length < 8:
            break
        if kind == RECORD_LOST:
            found.append((kind, 0, 0, 0, 0))
        elif kind in (RECORD_FORK, RECORD_EXIT) and length >= 32:
            pid, ppid, tid, _, stamp = FIELDS.unpack_from(*fields)
            found.append((kind, pid, ppid, tid, stamp))
        position += length
    HEAD.pack_into(ring, TAIL_AT, head)
    return found


def _bytes(ring: mmap.mmap, offset: int, size: int, position: int, length: int) -> bytes:
    """``length`` bytes of the ring's data at stream ``position``, across its end if need be."""
    start = position % size
    if start + length <= size:
        return ring[offset + start : offset + start + length]
    first = size - start
    return ring[offset + start : offset + size] + ring[offset : offset + length - first]
