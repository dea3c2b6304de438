"""Who holds a dead run's lock when its runner does not (``other_holder``: a sweep at work on
it, which a waiting sweep, ``prune``, waits for: ``sweep._waiting``), and the ``dead`` mark,
whose time says when a run's sweep first found the run dead (``dead_for``).

A sweep holds a dead run's lock from its probe on, through every step of ending the run: a
``sweeping`` mark it wrote once that hold was taken (older versions did) left a window in which
``prune`` found the lock held, no mark, and took the run for live, returning 0 with the run's
directory, groups and members still there. The holder is therefore read from the kernel
(``/proc/locks``), which names it from the moment it holds the lock: a holder is the runner only
when its pid, in its own pid namespace (the last of ``NSpid``), is the one the run's token
starts with (``rundir.new_token``: the process that took the lock), and it started before the
token's time (a later process given the dead runner's pid is not it). A holder this /proc does not
show (a runner in another pid namespace: no line, as for a lock let go, or pid 0) or whose status
cannot be read is taken for the runner, never waited for. What a planted directory (another user's lock held by its planter)
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
from .members import read_stat, status_fields

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


def other_holder(lock: os.stat_result, token: str) -> int | None:
    """Who ``/proc/locks`` shows holding the run's lock (``lock``: the file a probe found held):
    the pid of a process that is not the run's runner (a sweep at work on the dead run); 0 when
    no holder is shown (the lock let go in between, or its holder is one this /proc does not
    show); None when the holder is the runner, or cannot be told from it (the module's
    preamble)."""
    runner = token.partition("-")[0].encode()
    found = _holders(lock)
    for pid in found:
        try:
            ids = status_fields(read_bytes(f"/proc/{pid}/status"), (b"NSpid",)).get(b"NSpid", b"").split()
        except FileNotFoundError:
            return 0  # gone meanwhile, its lock with it
        except OSError:
            return None  # unreadable: taken for the runner
        if not ids or ids[-1] == runner and not _started_after(pid, token):
            return None
    return found[0] if found else 0


# How much later than the token's time a holder with the runner's pid must have started to be
# taken for another process (its start is read in clock ticks, the token's time from the wall
# clock): the runner made its token after it started.
REUSED_AFTER_NS = 1_000_000_000


def _started_after(pid: int, token: str) -> bool:
    """Whether ``pid`` started after the run's token was made (``rundir.new_token``: pid, time):
    a later process reusing the dead runner's pid (a sweep), not the runner. A wall clock set
    forward since can only have a runner taken for another, whose wait is bounded; one that
    cannot be read is the runner."""
    try:
        made = int(token.split("-")[1], 16)
        started = int(read_stat(pid)[1][19]) * (1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return False
    age = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - started
    return age < time.time_ns() - made - REUSED_AFTER_NS


def _holders(lock: os.stat_result) -> list[int]:
    """The pids ``/proc/locks`` shows holding (not waiting for) a flock on ``lock``'s inode, this
    pid namespace's. The device is matched where it can be: what ``/proc/locks`` names (the
    inode's super block) may differ from ``st_dev`` (btrfs subvolumes, overlayfs), so a line on
    the inode alone is taken when none names the device too (a false match costs only the
    waiting sweep's bounded wait)."""
    device = f"{os.major(lock.st_dev):02x}:{os.minor(lock.st_dev):02x}".encode()
    inode = str(lock.st_ino).encode()
    same: list[int] = []
    inode_only: list[int] = []
    try:
        with open("/proc/locks", "rb") as locks:
            for line in locks:
                fields = line.split()
                # "<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"; a waiter has "->"
                if len(fields) < 6 or fields[1] != b"FLOCK" or not fields[4].isdigit() or int(fields[4]) <= 0:
                    continue
                where, _, number = fields[5].rpartition(b":")
                if number == inode:
                    (same if where == device else inode_only).append(int(fields[4]))
    except OSError:
        return []
    return same or inode_only
