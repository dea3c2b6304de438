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

A path naming a descriptor (``--stdin-file /dev/fd/N``, ``/proc/self/fd/N``, an ``--env-file``
or a ``--jsonl`` so, or a link to one) is opened only when the caller passed that descriptor
(``refuse_unpassed``): any other is the runner's own file at that moment (its events, a capture,
a lock, in the API's service another call's memfd), never meant as the child's input nor as a
place to write a run's events or output.
"""

from __future__ import annotations

import errno
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


def withhold(fd: int) -> None:
    """``fd`` noted by ``take`` but not the caller's: a detached copy's readiness pipe."""
    global _taken
    _taken = tuple(kept for kept in _taken if kept != fd)


def unpassed(dir_fd: int, name: str) -> int | None:
    """The descriptor that the ``/proc`` link ``name`` in the directory ``dir_fd`` is, when it is
    one of this process's own that its caller did not pass (neither 0-2 nor one ``take`` noted);
    None for any other (another process's, or not a descriptor's link). A detached copy noted
    what its launcher handed it (``cli/detach.py``): those alone."""
    try:  # the kernel's name for the directory: /proc/<pid>/fd or /proc/<pid>/task/<tid>/fd
        where = os.readlink(f"/proc/self/fd/{dir_fd}").split("/")
    except OSError:
        return None
    task = where[-2] if len(where) > 2 and where[-1] == "fd" else ""
    if not (task.isascii() and task.isdigit() and name.isascii() and name.isdigit()):
        return None
    if not os.path.exists(f"/proc/self/task/{task}"):  # a task of another process: its descriptors
        return None
    fd = int(name)
    return None if fd <= 2 or fd in _taken else fd


def refuse_unpassed(dir_fd: int, name: str) -> None:
    """Raise OSError (EBADF) when the ``/proc`` link ``name`` in ``dir_fd`` is one of this
    process's own descriptors that its caller did not pass (``unpassed``)."""
    fd = unpassed(dir_fd, name)
    if fd is not None:
        raise OSError(errno.EBADF, f"descriptor {fd} was not passed to the runner, which holds a file of its own there")
