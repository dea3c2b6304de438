"""Liveness by advisory lock: a live process holds an exclusive ``flock`` on a file for its whole
life, and a probe that can take that lock has proof the holder is gone.

Facts about flock that the design rests on: the kernel drops a lock when the last descriptor
of its open file description closes, which a process's death always does (SIGKILL and the OOM
killer included), so a dead process can never hold one; a lock is visible to every process
that opens the same file, whatever its pid namespace, so a holder invisible in this /proc still
reads as alive; and a lock is held by an open file description, not a path, so a taker checks
that the path still names the file it locked (someone may have unlinked it in between). A file
that merely exists proves nothing. Holders open their descriptor close-on-exec, so a child
never inherits (and never prolongs) the lock.

Used by the registry (a run's ``.lock``) and by the run directory (``live.lock``).
"""

from __future__ import annotations

import os
import stat

from .native import lock_exclusive
from .plain import Constant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, ClassVar


class Health(Constant):
    """What a lock says of its holder; ``value`` is the word clients show; ``Health.members()``
    gives the three. (Fixed instances, not an ``enum``: every run probes locks, and ``enum``
    costs its start-up the import.)"""

    __slots__ = ()
    LIVE: ClassVar[Health]
    STALE: ClassVar[Health]
    UNPROBED: ClassVar[Health]


Health.LIVE = Health("LIVE", "live")
Health.STALE = Health("STALE", "stale")
Health.UNPROBED = Health("UNPROBED", "unprobed")


def take(path: str, mode: int = 0o600) -> int | None:
    """Create ``path`` and hold it exclusively: the held descriptor, or None when the name is
    taken or lost before the lock was held; raises OSError when it cannot be created at all."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileExistsError:
        return None
    try:
        lock_exclusive(fd)
        held, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
        if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def probe(
    directory: str, lock_name: str, *, hold: bool = False, again: Callable[[int], bool] | None = None
) -> tuple[Health, int | None]:
    """The lock's health. With ``hold``, a stale lock stays held and its descriptor is returned
    (None when the file is missing) so the caller can reap under it; otherwise it is released.
    ``again``: asked each time the lock is found held (given the descriptor) whether to try once
    more (after its own pause, if any), on the same descriptor: a waiting sweep's, for another
    at work on a dead run (``containment.sweep``); a lock then freed whose file its holder
    removed meanwhile reads as missing."""
    path = os.path.join(directory, lock_name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Health.STALE, None
    except OSError:
        return Health.UNPROBED, None
    waited = False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        while True:
            try:
                lock_exclusive(fd)
                break
            except BlockingIOError:
                if again is None or not again(fd):
                    raise
                waited = True
    except BlockingIOError:
        os.close(fd)
        return Health.LIVE, None
    except OSError:
        os.close(fd)
        return Health.UNPROBED, None
    if hold and not (waited and not _still_named(fd, path)):
        return Health.STALE, fd
    os.close(fd)
    return Health.STALE, None


def _still_named(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file ``fd`` is open on."""
    try:
        named, held = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
