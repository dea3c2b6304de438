"""What one native spawn of ``true`` costs the process that spawns it (csrc/spawn.c).

Calls the engine's native spawn (``spawn_native.Pending``: the C spawn ``processkit-cli run``
and ``batch`` take, waited for) in a loop from this interpreter and reports the median wall
time of the call (until the child has exec'd) and the median CPU time this process spent in it (all its threads; the child's own
CPU is not in it), and the median CPU time of the child, from its clone to its exit (``wait4``:
its steps before the exec, the exec and ``true``). ``--cgroup`` clones each child into a fresh cgroup v2 group, as a run does
(needs root and a writable cgroup2 mount); ``--ballast MIB`` first grows this process's
resident memory, which a copy-on-write child pays for in page tables; ``--own-memory`` takes
that child (a run with a memory cap's, csrc/spawn.c) where the shared one is built; ``--held N``
first opens N files of their own (as the API's service holds its pool's idle groups' files), which
every clone copies and every child closes again. Run it under two installs, alternating, to compare
builds (bench/README.md):

    python3 bench/spawn_cost.py --calls 300 --cgroup --ballast 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from processkit.containment import cgroup_v2, cgroupfs
from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native


def fresh_group(parent: str, index: int) -> tuple[str, ChildJoins]:
    path = os.path.join(parent, f"pk-spawn-cost-{os.getpid()}-{index}")
    procs = cgroupfs.make_group(path)
    return path, ChildJoins(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), procs)


def measure(calls: int, parent: str | None, own_memory: bool) -> tuple[list[float], list[float], list[float]]:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    walls, cpus, children = [], [], []
    for index in range(calls):
        path, joins = fresh_group(parent, index) if parent else (None, ChildJoins())
        wall, cpu = time.perf_counter(), time.process_time()
        child = spawn_native.Pending(
            ["true"], env, None, joins, [-1, -1, -1], False, 0, own_memory=own_memory, passed=()
        ).wait()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert child.stage == 0, os.strerror(child.error)
        usage = os.wait4(child.pid, 0)[2]
        children.append(usage.ru_utime + usage.ru_stime)
        for fd in (child.pidfd, joins.cgroup_dir_fd, joins.cgroup_procs_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        if path:
            cgroupfs.remove_group(path)
    return walls, cpus, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--cgroup", action="store_true", help="each child into a fresh cgroup v2 group")
    parser.add_argument("--ballast", type=int, default=0, metavar="MIB", help="resident memory to add first")
    parser.add_argument("--own-memory", action="store_true", help="the copy-on-write child (a capped run's)")
    parser.add_argument("--held", type=int, default=0, metavar="N", help="files of their own to hold open first")
    options = parser.parse_args()
    held = [os.open("/proc/self/stat", os.O_RDONLY | os.O_CLOEXEC) for _ in range(options.held)]
    ballast = bytearray(options.ballast << 20)
    for offset in range(0, len(ballast), 4096):
        ballast[offset] = 1  # resident, not just reserved
    parent = cgroup_v2.find_parent() if options.cgroup else None
    if options.cgroup and parent is None:
        parser.error("no cgroup2 mount here")
    walls, cpus, children = measure(options.calls, parent, options.own_memory)
    with open("/proc/self/statm") as statm:
        rss_kib = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    figures = {
        "calls": options.calls,
        "cgroup": options.cgroup,
        "own_memory": options.own_memory,
        "held": len(held),
        "rss_kib": rss_kib,
        "wall_ms_median": round(statistics.median(walls) * 1e3, 4),
        "cpu_ms_median": round(statistics.median(cpus) * 1e3, 4),
        "cpu_ms_mean": round(statistics.fmean(cpus) * 1e3, 4),
        "child_cpu_ms_median": round(statistics.median(children) * 1e3, 4),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
