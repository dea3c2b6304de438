"""The batch's output directory and its jobs' directories, made so another user cannot steer
them. ``--out`` is walked by ``safepath`` (never through a link at its end, only through
directories no one else can change, owned by this user); a job's directory is then made inside
it, where no one else can plant anything, and checked again as it is used.

Facts about ext4's inode allocator, which is why an empty ``--out`` is marked a top directory:
- On an ext4 without a journal (the root file system of many VMs, this project's CI host
  among them), making an inode skips every inode of its block group that was freed in the last
  minute or more (longer while the inode table block is dirty), one buffer lookup each, from the
  start of the group. After an earlier ``--out`` tree of thousands of files was removed, every
  file made in that group steps over all of them, so each creation costs many times one on tmpfs.
- A new directory goes to its parent's group, unless the parent carries ``FS_TOPDIR_FL``
  (``chattr +T``): then the Orlov allocator spreads its subdirectories over groups with more
  free inodes than average. A file goes to its directory's group.
So each job's directory, with its stream and capture files, lands in a group that an earlier
removal most likely left alone. Only an empty ``--out`` is marked (one this batch made, or a fresh
``mktemp -d``), never a directory that already holds something; other file systems refuse or
ignore the flag, and that is fine: it is only a placement hint.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import os
import stat
import struct

from ..diagnostics import warn
from ..errors import Failure, Kind, usage
from ..native import lock_exclusive
from ..safepath import private_directory
from ..text import NAMES_SHOWN
from .manifest import JOB_ID

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from .unique import Names


def out_named(path: str, named: str) -> str:
    """``path`` as given for the batch's directory (``named``: the CLI's ``--out <DIR>``, the
    API's ``out=``), refused when empty (a script's ``--out "$OUT"`` with the variable unset): it
    names no directory, and the jobs' paths joined onto it would be ``/ID`` (the API's, the
    caller's directory's). Checked before the manifest is read, by the CLI and the API alike."""
    if path == "":
        raise usage(f"invalid value '' for '{named}': expected a directory (an empty path names none)")
    return path


def prepare_out(path: str, named: str = "--out") -> bool:
    """``path`` as this user's own directory on a path no one else can change; made when missing.
    ``named``: how a failure names it (the CLI's ``--out``, the API's ``out=``). Whether it was
    empty (so it holds nothing an earlier batch left)."""
    try:
        fd = private_directory(path, create=True, mode=0o755)
    except OSError as exc:
        raise Failure(
            Kind.SETUP, f"cannot use {named} {path}: {exc.strerror or exc} (a link is never followed)"
        ) from None
    assert fd is not None, "made when missing"
    try:
        _check_private(os.fstat(fd), path, named)
        return mark_top_directory(fd)
    finally:
        os.close(fd)


LOCK_FILE = ".batch-lock"  # no job id's name: an id starts with a letter or a digit


def lock_out(out: str) -> int:
    """``out``'s lock file (``LOCK_FILE``, 0600), locked (``flock``) for the batch's life: one
    batch at a time writes into an ``--out``; a second is refused (111) before its summary is
    emptied. The file is in ``out``, which ``prepare_out`` found the caller's own and writable by no
    one else, and only the caller may open it: no other user can lock it (a lock of theirs on
    ``summary.jsonl``, 0644, guards nothing, and keeps no batch out). The descriptor: closing it
    lets the lock go (the kernel does however the batch ends); on a file system without locks the
    batch goes on unguarded."""
    path = os.path.join(out, LOCK_FILE)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot lock {path}: {exc.strerror or exc}") from None
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode) or facts.st_uid != os.geteuid():
            raise Failure(Kind.SETUP, f"cannot lock {path}: it is no regular file of this user's")
        if facts.st_mode & 0o077:  # opened up by this user: no one else's open from now on
            os.fchmod(fd, 0o600)
        lock_exclusive(fd)
    except BlockingIOError:
        os.close(fd)
        raise Failure(
            Kind.SETUP,
            f"cannot use {out}: another batch is writing into it now (its {LOCK_FILE} is locked); "
            "wait for that batch to end, or give another output directory",
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP):
            return fd  # a file system without locks: unguarded, as before
        os.close(fd)
        raise Failure(Kind.SETUP, f"cannot lock {path}: {exc.strerror or exc}") from None
    except Failure:
        os.close(fd)
        raise
    return fd


_LONG = struct.calcsize("l")  # the ioctl's declared size; the kernel reads and writes an int
_GET_FLAGS = 2 << 30 | _LONG << 16 | ord("f") << 8 | 1  # FS_IOC_GETFLAGS
_SET_FLAGS = 1 << 30 | _LONG << 16 | ord("f") << 8 | 2  # FS_IOC_SETFLAGS
TOPDIR_FLAG = 0x00020000  # FS_TOPDIR_FL


def mark_top_directory(fd: int) -> bool:
    """Mark the empty directory ``fd`` a top of hierarchy for the inode allocator (see the
    facts above), a best effort that never raises; whether it was empty (False also when it
    could not be read)."""
    try:
        with os.scandir(fd) as entries:
            if next(entries, None) is not None:
                return False
    except OSError:
        return False
    try:
        flags = bytearray(_LONG)
        fcntl.ioctl(fd, _GET_FLAGS, flags)
        current = struct.unpack_from("i", flags)[0]
        if not current & TOPDIR_FLAG:
            struct.pack_into("i", flags, 0, current | TOPDIR_FLAG)
            fcntl.ioctl(fd, _SET_FLAGS, flags)
    except OSError:
        pass  # another file system: only a placement hint was lost
    return True


def ensure_directory(path: str, what: str) -> str:
    """``path`` as a directory this user owns and alone may write; made when missing. One this
    call made is this user's, and its mode (0o755 less the umask) lets no one else write: it is
    checked only when it was there already (its parent is the caller's own, so nobody else can
    have put it there since)."""
    try:
        os.mkdir(path, 0o755)
        return path
    except FileExistsError:
        pass
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot create {what} {path}: {exc.strerror}") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: {exc.strerror} (a link is never followed)") from None
    try:
        _check_private(os.fstat(fd), path, what)
    finally:
        os.close(fd)
    return path


def drop_earlier_attempts(directory: str) -> None:
    """Before a job's first attempt in a batch whose ``--out`` was not empty: the ``attempt-N``
    directories an earlier batch left in the job's directory go. Kept, they would read as this
    job's attempts (its line names only this batch's), and a retry of this batch could not move
    its attempt aside onto them. Removed through handles on the job's directory, never
    following a link; a failure is a warning (the job still runs). One failed ``open`` when
    the job has no directory."""
    try:
        fd = os.open(directory, _DIRECTORY_FLAGS)
    except OSError:
        return
    try:
        for name in os.listdir(fd):
            number = name.removeprefix("attempt-")
            if number != name and number.isascii() and number.isdigit():
                try:
                    _remove_tree(fd, name, ATTEMPT_DEPTH)
                except OSError as exc:
                    warn(f"cannot remove {os.path.join(directory, name)}, an earlier batch's: {exc.strerror}")
    finally:
        os.close(fd)


def left_as_they_were(out: str | int, started: Names, stopping: Callable[[], bool]) -> tuple[int, list[str], bool]:
    """The job directories in ``out`` (a job id's name; a path, or a handle ``report`` opened)
    that ``started`` (the ids of the jobs this
    batch started) certainly does not hold, so an earlier batch's: a job this batch does not have,
    or one it never started. One listing, by name (no entry's status read: the directory's type
    comes with its name), its clock none of this batch's. How many, the first ``NAMES_SHOWN`` of
    their names in order, and whether a stop (``stopping``, asked every ``_ASKED_EVERY`` entries)
    cut the listing short."""
    count = 0
    first: list[str] = []
    try:
        with os.scandir(out) as entries:
            for seen, entry in enumerate(entries):
                if seen % _ASKED_EVERY == 0 and stopping():
                    return count, first, True
                name = entry.name
                with contextlib.suppress(OSError):
                    if (
                        JOB_ID.fullmatch(name)
                        and not started.noted("id", name, note=False)
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        count += 1
                        if len(first) < NAMES_SHOWN or name < first[-1]:
                            bisect.insort(first, name)
                            del first[NAMES_SHOWN:]
    except OSError:
        pass
    return count, first, False


_ASKED_EVERY = 1024  # a look at the stop signals' flag per this many entries listed


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
ATTEMPT_DEPTH = 3  # attempt-N/capture/stdout.log: deeper than that is none of an attempt's


def _remove_tree(parent: int, name: str, depth: int) -> None:
    """``name`` in the directory ``parent`` and what it holds, each entry by its handle's
    directory (a link or any other non-directory is unlinked, never followed); raises OSError,
    ENOTEMPTY past ``depth``."""
    try:
        fd = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        os.unlink(name, dir_fd=parent)
        return
    try:
        if depth > 0:
            for entry in os.listdir(fd):
                _remove_tree(fd, entry, depth - 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _check_private(facts: os.stat_result, path: str, what: str) -> None:
    if facts.st_uid != os.geteuid():
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: it belongs to another user")
    if facts.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: others may write to it")
