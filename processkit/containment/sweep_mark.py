"""The ``sweeping`` mark a sweep leaves in a dead run's directory while it holds the run's lock
(``sweep_dead``), and what makes a waiting sweep (``prune``) trust one (``sweep.wait_for_sweep``);
and the ``dead`` mark, whose time says when a run's sweep first found the run dead (``dead_for``).

All go through a descriptor of the run's directory, opened without following a link and
checked still the private directory ``rundir.locate`` found (its owner's, no one else's to
enter): another user swapping their directory for a link after the locate never has root make
a file, or read one, where that link points.

A mark alone proves nothing: anyone who may write in the directory can put a file of that name
there (its owner into a live runner's, another user into the directories they plant). A waiting
sweep waits only for one that is a regular file owned by root or the directory's owner, naming
a process that holds the run's lock now (``/proc/locks``) and is not the run's runner (whose pid
the token starts with). What a planted run directory can still cost is bounded by the sweep's
one deadline for all its waits (``sweep.Reaped.wait_until``), not one per run.
"""

from __future__ import annotations

import os
import stat
import time

from .. import rundir

MARK_LIMIT = 32  # a pid, in decimal
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_EXCL: never a link followed, never a FIFO waited on; a ``sweeping`` name already there is
# replaced only when it is a dead sweep's mark (``_clear_stale``), else left as it is; a ``dead``
# one is never opened, only looked at (``dead_for``).
_MARK_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def mark(path: str, owner: int, held: int) -> None:
    """Say, in the dead run's directory, that its lock (``held``, this sweep's) is held by a
    sweep, not by a runner, naming this process: a waiting sweep then waits for this one instead
    of taking the run for live and returning while its groups are still being removed. Made only
    in the directory whose lock is ``held``. Left behind by a sweep that dies, it says nothing
    (the lock is then free), and the next sweep replaces it: kept, it would stop every later
    sweep marking, and a waiting one would take the run for live again. Best effort."""
    fd = _open_dir(path, owner)
    if fd is None:
        return
    try:
        lock = os.stat(rundir.LOCK_NAME, dir_fd=fd, follow_symlinks=False)
        if not _same(lock, os.fstat(held)):
            return
        try:
            made = os.open(rundir.SWEEPING_NAME, _MARK_FLAGS, 0o600, dir_fd=fd)
        except FileExistsError:
            if not _clear_stale(fd, owner, lock):
                return
            made = os.open(rundir.SWEEPING_NAME, _MARK_FLAGS, 0o600, dir_fd=fd)
        try:
            os.write(made, str(os.getpid()).encode())
        finally:
            os.close(made)
    except OSError:
        pass
    finally:
        os.close(fd)


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


def _clear_stale(fd: int, owner: int, lock: os.stat_result) -> bool:
    """Unlink a mark a dead sweep left (a regular file of root's or the owner's whose pid does
    not hold the run's lock), by name in the directory ``fd``; whether it was. Anything else there
    (a live holder's mark, a link, a FIFO, another user's file) is left."""
    pid = _marking_pid(fd, owner)
    if pid is None or _holds_flock(pid, lock):
        return False
    os.unlink(rundir.SWEEPING_NAME, dir_fd=fd)
    return True


def sweep_holds(path: str, owner: int, token: str) -> bool:
    """Whether the run's held lock is another sweep's at work on it, by its mark (the module's
    preamble says what is trusted)."""
    fd = _open_dir(path, owner)
    if fd is None:
        return False
    try:
        lock = os.stat(rundir.LOCK_NAME, dir_fd=fd, follow_symlinks=False)
        pid = _marking_pid(fd, owner)
    except OSError:
        return False
    finally:
        os.close(fd)
    runner = token.partition("-")[0]
    return pid is not None and str(pid) != runner and _holds_flock(pid, lock)


def _marking_pid(fd: int, owner: int) -> int | None:
    """The pid the mark names, when it is a small regular file of root's or the owner's."""
    try:
        found = os.open(rundir.SWEEPING_NAME, _READ_FLAGS, dir_fd=fd)
    except OSError:
        return None
    try:
        facts = os.fstat(found)
        if not stat.S_ISREG(facts.st_mode) or facts.st_uid not in (0, owner) or facts.st_size > MARK_LIMIT:
            return None
        text = os.read(found, MARK_LIMIT + 1)
    finally:
        os.close(found)
    return int(text) if text.isdigit() and len(text) <= MARK_LIMIT else None


def _holds_flock(pid: int, lock: os.stat_result) -> bool:
    """Whether ``/proc/locks`` shows ``pid`` holding (not waiting for) a flock on ``lock``."""
    where = f"{os.major(lock.st_dev):02x}:{os.minor(lock.st_dev):02x}:{lock.st_ino}"
    try:
        with open("/proc/locks", "rb") as locks:
            for line in locks:
                fields = line.split()
                # "<n>: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"; a waiter has "->"
                if len(fields) >= 6 and fields[1] == b"FLOCK" and fields[4] == str(pid).encode():
                    if fields[5].decode("ascii", "replace") == where:
                        return True
    except OSError:
        return False
    return False
