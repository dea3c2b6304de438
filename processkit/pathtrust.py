"""Whose a path is: the owner rules that ``safepath``'s walk and ``userfiles``' opens apply to
each directory, link and file they meet. Apart from the walk because they judge one file's
owner and mode, not a path: ``userfiles`` and ``useroutputs`` ask them of what they find beside
``safepath``'s walk, and the registry of its own directory.

The trust boundary is the OS user (docs/threat-model.md, "Other users' paths"): this user and
root are trusted, and so, inside a user namespace, is an owner shown as the overflow uid (no
process in here can act as that one). Only ``os``, ``stat`` and ``errno`` are imported: this is
on a plain run's path.
"""

from __future__ import annotations

import errno
import os
import stat

_unmapped: list[int] = []  # the uid an unmapped owner shows as, in a user namespace; else none


class UnsafePath(OSError):
    """A path refused because another user could redirect what is written through it."""

    def __init__(self, reason: str):
        super().__init__(errno.EACCES, reason)


class ForeignStream(UnsafePath):
    """A stream read by run id that is not that run's to show: another user's file where its
    record points (``check_run_stream``), or one whose first ``run_started`` names another run
    (``events.follow``). Apart from other refusals so a reader can say whose it is not. Its text
    is the reason alone: an API caller's ``events()`` raises it, and ``[Errno 13]`` (EACCES,
    "Permission denied") in front would say a permission refused it."""

    def __str__(self) -> str:
        return str(self.strerror)


def trusted(uid: int) -> bool:
    """This user, root, or (inside a user namespace) an owner outside it, shown as the
    overflow uid: no process in here can act as that one (``unshare -r`` shows ``/`` so)."""
    if uid in (os.geteuid(), 0):
        return True
    if not _unmapped:
        try:
            with open("/proc/self/uid_map", "rb") as handle:
                whole = handle.read().split() == [b"0", b"0", b"4294967295"]
            with open("/proc/sys/kernel/overflowuid", "rb") as handle:
                _unmapped.append(-1 if whole else int(handle.read(16)))
        except (OSError, ValueError):
            _unmapped.append(-1)
    return uid == _unmapped[0]


def others_can_write(found: os.stat_result) -> bool:
    """Writable by others, or by a group other than this user's own primary group (with
    user-private groups, umask 002 makes a user's own directories group-writable)."""
    if found.st_mode & stat.S_IWOTH:
        return True
    return bool(found.st_mode & stat.S_IWGRP) and found.st_gid != os.getegid()


def others_can_change(folder: os.stat_result) -> bool:
    """Whether other users can change what the directory ``folder`` holds: theirs, or one they
    can write into."""
    return not trusted(folder.st_uid) or others_can_write(folder)


def check_run_stream(fd: int, shown: str) -> None:
    """A run's stream reached by the path its record names (``events --run-id``, an attached
    handle's events): a regular file of anyone but this user or root there is that user's to
    write, so its events are theirs to choose (one put in the runner's place, or a ``--jsonl``
    of theirs the runner reused). Raises ForeignStream; ``wait --report-outcome`` reads such a file
    as ``unknown`` (``registry.stream_outcome``)."""
    found = os.fstat(fd)
    if stat.S_ISREG(found.st_mode) and not trusted(found.st_uid):
        raise ForeignStream(
            f"{shown} belongs to uid {found.st_uid}, not to {_this_user()}: that user can write what it says"
        )


def _this_user() -> str:
    me = os.geteuid()
    return "root" if me == 0 else f"this user (uid {me}) or root"


def check_on_private_path(fd: int, here: str) -> None:
    """Only this user or root may rename or replace what this directory holds."""
    found = os.fstat(fd)
    if not trusted(found.st_uid):
        raise UnsafePath(f"its path goes through {here}, which belongs to uid {found.st_uid}")
    if others_can_write(found) and not found.st_mode & stat.S_ISVTX:
        raise UnsafePath(f"its path goes through {here}, which other users can write")


def check_existing(fd: int, dir_fd: int, shown: str) -> None:
    """A file that was already there is reused only when no one else could have planted it."""
    if not others_can_change(os.fstat(dir_fd)):
        return  # only this user or root can put anything here
    found = os.fstat(fd)
    if found.st_uid != os.geteuid():
        raise UnsafePath(
            f"{shown} already exists and belongs to uid {found.st_uid}, in a directory other users can change"
        )
    if stat.S_ISREG(found.st_mode) and found.st_nlink > 1:
        raise UnsafePath(f"{shown} already exists with other hard links, in a directory other users can change")
