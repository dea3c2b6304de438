"""Whether a native spawn's child must have memory of its own from the clone (the
copy-on-write child, ``own_memory`` in csrc/spawn.h) rather than share the runner's until its
exec: the rules, which ``spawn._own_memory`` applies, and the walk up a run's v2 group placed
apart from the runner, loaded only for such a run.

Why: the kernel's OOM kill ends, with its victim, every process that shares the victim's
memory, and a child killed while it still shares the runner's (before or within its execve)
takes the runner with it: the CLI's run, or the API's service or a batch with every run it
carries. A memory cgroup's OOM kill picks its victim among the group's own processes, so what
matters is a limit on a group that holds the child and not the runner:

- the run's own cap (``--max-memory``, the API's ``max_memory``, a manifest's key): v2
  ``memory.max`` or v1 ``memory.limit_in_bytes`` on a group made for the run alone;
- a limit on an ancestor of the run's v2 group placed apart from the runner
  (``PROCESSKIT_CGROUP_PARENT``, below the group where the two paths meet), where an OOM kill
  ranks the pre-exec child, scored by the runner's whole resident set, above the other runs
  there; likewise, not looked into, any v1 group made under ``PROCESSKIT_CGROUP_V1_ROOT``.

A limit on a group that holds the runner too (its own group, where runs are made by default,
or any above it; the whole machine's) needs none: the shared child is scored exactly as the
runner is, so an OOM kill that picks it would have picked the runner anyway. Nor does an
uncapped run's v1 memory group (accounting only; a pooled one is lent only with no limit set).
Every other spawn keeps the shared child, the cheap one (csrc/spawn.c).
"""

from __future__ import annotations

import os

from ..containment import cgroupfs
from ..containment.cgroup_v2 import own_group
from ..spec import own_pid


def limited_apart(group: str) -> bool:
    """Whether a group above the v2 ``group``, below the lowest one that also holds the runner,
    has a ``memory.max`` less than ``max``; so does one whose limit cannot be read. A group
    without the file (no memory controller) does not end the walk: one above it may have one.
    Where the runner's own group cannot be told, every group up to the root is looked at (a
    copy-on-write spawn is never wrong, only dearer).

    Walked on every such spawn, never cached: a limit set on a parent after the last spawn (an
    operator's, a container manager's) must decide the next one. Each level costs what it must:
    one ``open``, one ``read`` and one ``close`` of its ``memory.max`` (``cgroupfs.read_bytes``:
    the file is one short record, ``max`` or a byte count, which the kernel's ``seq_file`` hands
    over whole in that one read; a read bounded to 32 bytes measured no cheaper), and a ``stat``
    more only at a level without the file. The runner's own group, where the walk stops, is read
    once per process (``_runner_group``)."""
    runner = _runner_group()
    above = os.path.dirname(group)
    while runner is None or not (runner + "/").startswith(above.rstrip("/") + "/"):
        try:
            if cgroupfs.read_text(os.path.join(above, "memory.max")).strip() != "max":
                return True
        except FileNotFoundError:
            if not os.path.exists(os.path.join(above, "cgroup.procs")):
                return False  # above the hierarchy's root
        except OSError:
            return True
        if above == os.path.dirname(above):
            return False
        above = os.path.dirname(above)
    return False


# This process's own group, read once per process: (its pid, the group). A forked child, whose
# pid differs, reads its own (it may have been moved since).
_runner: tuple[int, str | None] | None = None


def _runner_group() -> str | None:
    """This process's own cgroup v2 directory (its ``0::`` line under the cgroup2 mount); None
    where it cannot be told, which only makes ``limited_apart`` look further."""
    global _runner
    pid = own_pid()
    if _runner is None or _runner[0] != pid:
        _runner = (pid, _read_runner_group())
    return _runner[1]


def _read_runner_group() -> str | None:
    own = own_group()[1]
    return None if own is None else os.path.normpath(own)
