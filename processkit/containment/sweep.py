"""Removing the empty run groups that runners which died abruptly (SIGKILL, OOM) left behind.

A runner that lives to see its run's end removes its groups. One that is killed cannot, and an
empty ``processkit-*`` group then stays under the parent for good. So each group's name says
who made it: ``processkit-<runner pid>-<runner start time>-<creation ns, hex>``, the start
time being the kernel's (``/proc/<pid>/stat`` field 22, clock ticks since boot). A group is
its runner's while a process with that pid *and* that start time exists; a reused pid has a
later start time.

A group whose runner is gone is removed with a plain ``rmdir``, which the kernel refuses for a
group that still holds a process or a child group: the sweep can never take a group in use,
nor follow a symlink (``rmdir`` does not). Groups of the older ``processkit-<pid>-<ns>`` form
carry no start time and are removed only once their pid is free.

Runners are told apart by pid, so the sweep assumes that every runner making groups under a
parent shares this process's pid namespace (what a cgroup namespace per container gives). A
runner in another one looks dead from here; its group could then be removed in the moment it
is empty, between creation and its child's start, and that run would fail to start (102).

Runs sweep their own parent on the way in, bounded by CREATE_ATTEMPTS removals; ``prune``
sweeps every parent this process's cgroups live in without a bound.
"""

from __future__ import annotations

import os
import time
from typing import Iterable

from .members import read_member

PREFIX = "processkit-"
CREATE_ATTEMPTS = 32


def start_time(pid: int) -> str | None:
    """The process's start time token, or None when no process has that pid (or it is unreadable)."""
    member = read_member(pid)
    return member.start_time if member is not None else None


def group_name() -> str:
    """The name of a new group made by this process."""
    pid = os.getpid()
    return f"{PREFIX}{pid}-{start_time(pid)}-{time.time_ns():x}"


def orphaned(name: str) -> bool:
    """Whether ``name`` is a run group whose runner is gone."""
    if not name.startswith(PREFIX):
        return False
    parts = name[len(PREFIX) :].split("-")
    if (
        len(parts) not in (2, 3)
        or not all(part.isascii() and part.isdigit() for part in parts[:-1])
        or not parts[-1]
        or not all(ch in "0123456789abcdef" for ch in parts[-1])
    ):
        return False  # not a name a runner makes: never ours to remove
    running = start_time(int(parts[0]))
    if len(parts) == 2:
        return running is None
    return running != parts[1]


def sweep(parents: Iterable[str], attempts: int | None = None) -> int:
    """Remove the orphaned empty run groups under ``parents``; returns how many went.

    ``attempts`` bounds the ``rmdir`` calls (a group still holding an escaped process costs
    one refused call each time). Best effort: a parent that cannot be listed is skipped.
    """
    removed = 0
    for parent in dict.fromkeys(parents):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            if attempts is not None and attempts <= 0:
                return removed
            if not orphaned(name):
                continue
            if attempts is not None:
                attempts -= 1
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                continue
            removed += 1
    return removed


def parents() -> list[str]:
    """Every directory this process's run groups are made in: the cgroup v2 parent and the
    groups of the v1 hierarchies (for capped runs)."""
    from . import cgroup_v1, cgroup_v2

    found = [cgroup_v2.find_parent()] + list(cgroup_v1.own_groups().values())
    return [path for path in found if path is not None]
