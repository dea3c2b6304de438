"""Liveness: the advisory lock a live runner holds on its ``.lock`` file, and the probe that
reads it (docs/control-plane.md §2.2, §2.4).

The kernel releases a flock when its holder dies, so a lock that can be taken is proof that
the runner is gone; a file that merely exists proves nothing. The runner's descriptor is
close-on-exec, so the child never inherits (and never prolongs) the lock.
"""

from __future__ import annotations

import enum
import fcntl
import itertools
import os
import stat
import time

from .location import RegistryError

CREATE_ATTEMPTS = 128
_sequence = itertools.count()


class Health(enum.Enum):
    LIVE = "live"
    STALE = "stale"
    UNPROBED = "unprobed"


def create(directory: str) -> tuple[str, int]:
    """A fresh ``<stem>.lock`` held exclusively: returns the stem and the held descriptor."""
    for _ in range(CREATE_ATTEMPTS):
        stem = f"run-{time.time_ns():032x}-{next(_sequence):016x}"
        path = os.path.join(directory, stem + ".lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise RegistryError(f"cannot create a lock file in {directory}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                return stem, fd
        except OSError:
            pass
        os.close(fd)
    raise RegistryError(f"cannot create a unique lock file in {directory} after {CREATE_ATTEMPTS} attempts")


def probe(directory: str, lock_name: str, *, keep: bool = False) -> tuple[Health, int | None]:
    """The lock's health. With ``keep``, a stale lock stays held and its descriptor is returned
    (None when the file is missing) so the caller can reap under it; otherwise it is released."""
    path = os.path.join(directory, lock_name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Health.STALE, None
    except OSError:
        return Health.UNPROBED, None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return Health.LIVE, None
    except OSError:
        os.close(fd)
        return Health.UNPROBED, None
    if keep:
        return Health.STALE, fd
    os.close(fd)
    return Health.STALE, None
