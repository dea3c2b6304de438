"""Who holds a dead run's lock when its runner does not (``other_holder``: a sweep at work on
it, which a waiting sweep, ``prune``, waits for: ``sweep._reap_run``), and the ``dead`` mark,
whose time says when a run's sweep first found the run dead (``dead_for``).

A sweep holds a dead run's lock from its probe on, through every step of ending the run: a
``sweeping`` mark it wrote once that hold was taken (older versions did) left a window in which
``prune`` found the lock held, no mark, and took the run for live, returning 0 with the run's
directory, groups and members still there. The holder is therefore read from the kernel
(``/proc/locks``), which names it from the moment it holds the lock: a holder is the runner only
when its pid, in its own pid namespace (the last of ``NSpid``), is the one the run's token
starts with (``rundir.new_token``: the process that took the lock). A holder this /proc does not
show (pid 0: a runner in another pid namespace) or whose status cannot be read is taken for the
runner, never waited for. What a planted directory (another user's lock held by its planter)
can cost a waiting sweep is bounded by the sweep's one deadline for all its waits
(``sweep.Reaped.wait_until``), not one per run.

The ``dead`` mark goes through a descriptor of the run's directory, opened without following a
link and checked still the private directory ``rundir.locate`` found (its owner's, no one
else's to enter): another user swapping their directory for a link after the locate never has
root make a file, or read one, where that link points.
"""

from __future__ import annotations

import os
import stat
import time

from .. import rundir
from .cgroupfs import read_bytes
from .members import status_fields

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_EXCL: never a link followed, never a FIFO waited on; a ``dead`` name already there is never
# opened, only looked at (``dead_for``).
_MARK_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_dir(path: str, owner: int) -> int | None:
    """A descriptor of the run directory, when it is still a real directory of ``owner``'s that
    no one else may enter (what ``rundir.locate`` saw); else None."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return None
    found = os.fstat(fd)
    if not stat.S_ISDIR(found.st_mode) or found.st_mode & 0o077 or found.st_uid != owner:
        os.close(fd)
        return None
    return fd


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def dead_for(path: str, owner: int, held: int) -> float | None:
    """How long the run, whose lock this sweep holds (``held``), has been seen dead: by the time
    of its ``dead`` mark, made now (0.0) by the first sweep to find it dead. None when no mark
    can speak for it (the directory is not what ``locate`` saw, the name is taken by anything
    but a regular file of root's or the owner's, it cannot be made, or its time is ahead of the
    clock): the sweep then ends the run at once, as it did before there was a mark, so a mark
    whose time cannot be trusted never holds a dead tree back."""
    fd = _open_dir(path, owner)
    if fd is None:
        return None
    try:
        if not _same(os.stat(rundir.LOCK_NAME, dir_fd=fd, follow_symlinks=False), os.fstat(held)):
            return None
        try:
            os.close(os.open(rundir.DEAD_NAME, _MARK_FLAGS, 0o600, dir_fd=fd))
            return 0.0
        except FileExistsError:
            found = os.stat(rundir.DEAD_NAME, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISREG(found.st_mode) or found.st_uid not in (0, owner):
            return None
        age = time.time() - found.st_mtime
        return age if age >= 0 else None
    except OSError:
        return None
    finally:
        os.close(fd)


def other_holder(path: str, owner: int, token: str) -> int | None:
    """The pid of a process holding the run's lock that is not the run's runner (a sweep at work
    on the dead run), by ``/proc/locks``; None when none is (the module's preamble says whom the
    runner is taken to be)."""
    fd = _open_dir(path, owner)
    if fd is None:
        return None
    try:
        lock = os.stat(rundir.LOCK_NAME, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)
    runner = token.partition("-")[0].encode()
    for pid in _holders(lock):
        try:
            ids = status_fields(read_bytes(f"/proc/{pid}/status"), (b"NSpid",)).get(b"NSpid", b"").split()
        except OSError:
            continue  # gone meanwhile (its lock with it), or unreadable: taken for the runner
        if ids and ids[-1] != runner:
            return pid
    return None


def _holders(lock: os.stat_result) -> list[int]:
    """The pids ``/proc/locks`` shows holding (not waiting for) a flock on ``lock``, this pid
    namespace's (0, one it does not show, left out)."""
    where = f"{os.major(lock.st_dev):02x}:{os.minor(lock.st_dev):02x}:{lock.st_ino}"
    found = []
    try:
        with open("/proc/locks", "rb") as locks:
            for line in locks:
                fields = line.split()
                # "<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"; a waiter has "->"
                if len(fields) >= 6 and fields[1] == b"FLOCK" and fields[5].decode("ascii", "replace") == where:
                    if fields[4].isdigit() and int(fields[4]) > 0:
                        found.append(int(fields[4]))
    except OSError:
        return []
    return found
