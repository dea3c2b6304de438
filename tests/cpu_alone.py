"""A benchmark whose runs have a CPU to themselves whatever the suite beside them does (a CI
runner's load): pinned to one CPU (``bench --cpus CPU``) at the highest priority (``to_the_front``
as its ``preexec_fn``, where ``allowed``), a CPU-bound command leaves others a tick or two of that
CPU, so its ``others_cpu_share`` reads about 0.05 (0.11 seen) at a load of 4-7 (0.7 at nice 0).
Autogroups apply only in the root task group (a process in a cpu cgroup of its own has none)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys


def cpu() -> int:
    """The CPU to pin to: one of the test's own affinity."""
    return max(os.sched_getaffinity(0))


@functools.cache
def allowed() -> bool:
    """Whether a child may take nice -20: root with CAP_SYS_NICE, or an RLIMIT_NICE of 40 (a
    container's root has no CAP_SYS_NICE by default). Asked once, of a child that tries it."""
    tried = subprocess.run(
        [sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, -20)"],
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return tried.returncode == 0


def front() -> dict:
    """``run_cli``'s keywords that put the runs at the front (``to_the_front``) where ``allowed``;
    none elsewhere, where they run beside the load at their nice (a test then skips on the load)."""
    return {"preexec_fn": to_the_front} if allowed() else {}


def to_the_front() -> None:
    """nice -20 in a session of its own: with autogroups (CONFIG_SCHED_AUTOGROUP) a nice weighs
    only against the processes of its own session, so the new session's group is given it too
    (best effort: without autogroups, or where /proc refuses the write, the nice alone weighs
    against every other process)."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write("-20")
    except OSError:
        pass
    os.setpriority(os.PRIO_PROCESS, 0, -20)
