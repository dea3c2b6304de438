"""The descriptors beyond 0-2 the CLI's caller started it with, which its children keep.

The reference spawns through Rust's ``std::process::Command``, which closes nothing: every
descriptor without close-on-exec reaches the child, as under ``make``, hyperfine or GNU
parallel. A build farm's recipe ``+processkit-cli run -- $(MAKE) -C sub`` depends on it: the
sub-make finds its jobserver pipe (``--jobserver-auth=R,W`` in ``MAKEFLAGS``) or runs with -j1.
The runner's own descriptors are made close-on-exec and the spawn closes every fd but these
(csrc/spawn_child.c, Popen's ``pass_fds``), so only the caller's are kept: the ones open without
close-on-exec when the CLI starts, before it opens any of its own. Taken once, by the CLI's
``main``; a process that never took them (the API's runner service and what it starts) passes
none, as ``subprocess`` does.
"""

from __future__ import annotations

import os

_taken: tuple[int, ...] = ()


def take() -> None:
    """Note this process's inherited descriptors from 3 up (none where /proc is not mounted)."""
    global _taken
    try:
        names = os.listdir("/proc/self/fd")  # its own fd is close-on-exec and closed before the looks below
    except OSError:
        return
    found = []
    for name in names:
        fd = int(name)
        try:
            if fd >= 3 and os.get_inheritable(fd):  # no close-on-exec (fcntl stays unloaded)
                found.append(fd)
        except OSError:
            continue  # the listing's own, closed already
    _taken = tuple(sorted(found))


def taken() -> tuple[int, ...]:
    """The descriptors ``take`` noted, ascending; () before it or without it."""
    return _taken
