"""A benchmark whose runs have a CPU to themselves whatever the suite beside them does (a CI
runner's load): pinned to one CPU (``bench --cpus CPU``) at the highest priority (``to_the_front``
as its ``preexec_fn``, root's), a CPU-bound command leaves others a tick or two of that CPU, so
its ``others_cpu_share`` reads under 0.05 at a load of 12 (0.7 at nice 0)."""

from __future__ import annotations

import os

import pytest


def cpu() -> int:
    """The CPU to pin to: one of the test's own affinity."""
    return max(os.sched_getaffinity(0))


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("nice -20, which keeps the runs' CPU theirs beside the suite's load, needs root")


def to_the_front() -> None:
    """nice -20 in a session of its own: with autogroups (CONFIG_SCHED_AUTOGROUP) a nice weighs
    only against the processes of its own session, so the new session's group is given it too;
    without them the nice alone weighs against every other process."""
    os.setsid()
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write("-20")
    except FileNotFoundError:
        pass
    os.nice(-20)
