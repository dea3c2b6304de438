"""How busy the host was while a benchmark ran: the CPU time other processes took, as a share of
every CPU's time, so the gate (``gate.py``) can tell a slower command from a busier machine.

The host's busy time is ``/proc/stat``'s first line (every CPU's user, nice, system, irq,
softirq and steal ticks: steal is a KVM guest's time taken by the host's other guests), less
this process's own CPU and that of the children it reaped (``getrusage``: every run's tree,
which ``bench`` reaps as their parent and subreaper). What remains over the benchmark's wall
time is the others' load: 0.0 on an idle machine, 1.0 when they kept every CPU busy. A run's
own wall time does not say this: a command that sleeps and one that waits for a CPU look
alike there.

The ticks are the kernel's USER_HZ (10 ms): over a benchmark's seconds that is well within
the tenths the gate looks at. Two reads per benchmark, none per run.
"""

from __future__ import annotations

import os
import resource
import time

from ..containment import cgroupfs

BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (idle and iowait are not)


class Sample:
    """The host's busy CPU time, this process's own, and the clock, at one moment (ns)."""

    __slots__ = ("busy_ns", "own_ns", "at_ns", "cpus")

    def __init__(self) -> None:
        tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
        first = cgroupfs.read_bytes("/proc/stat").split(b"\n", 1)[0].split()[1:]
        self.busy_ns = sum(int(first[index]) for index in BUSY_FIELDS if index < len(first)) * tick_ns
        own = 0.0
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
            used = resource.getrusage(who)
            own += used.ru_utime + used.ru_stime
        self.own_ns = int(own * 1e9)
        self.at_ns = time.monotonic_ns()
        self.cpus = os.cpu_count() or 1


def start() -> Sample | None:
    """A sample, or None where ``/proc/stat`` cannot be read (the share is then unknown)."""
    try:
        return Sample()
    except (OSError, ValueError, IndexError):
        return None


def others_share(since: Sample | None) -> dict | None:
    """What others took since ``since``: ``{"others_cpu_share", "cpus", "seconds"}`` (the share
    of all CPUs' time, 0 to 1), or None where it cannot be known."""
    now = start()
    if since is None or now is None or now.at_ns <= since.at_ns:
        return None
    capacity = (now.at_ns - since.at_ns) * now.cpus
    others = (now.busy_ns - since.busy_ns) - (now.own_ns - since.own_ns)
    share = min(max(others / capacity, 0.0), 1.0)
    return {"others_cpu_share": round(share, 3), "cpus": now.cpus, "seconds": round((now.at_ns - since.at_ns) / 1e9, 3)}


def own_max_rss() -> int:
    """This process's own largest resident set (bytes): the floor of every run's ``ru_maxrss``.
    ``execve`` records the resident high-water mark of the memory it replaces in the process's
    ``maxrss``; a child cloned with the spawner's memory (``CLONE_VM``, as ``posix_spawn`` and the
    native spawn do) replaces the spawner's, so no run reads below it (hyperfine's runs read at
    least hyperfine's own, likewise)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
