"""Opening again the file an ``O_PATH`` handle names (``safepath``'s walks judge a file through
such a handle before it is opened): through ``/proc/self/fd/N`` without waiting, so a FIFO no one
reads is refused, never waited for; where there is no ``/proc``, by its name in its directory,
checked to be the inode judged. Only ``os``, ``stat``, ``errno`` and ``pathtrust`` are imported:
this is on a plain run's path."""

from __future__ import annotations

import errno
import os
import stat

from .pathtrust import UnsafePath


def reopen(probe: int, flags: int, shown: str = "it", at: tuple[int, str] | None = None) -> int:
    """Open the file the ``O_PATH`` handle ``probe`` names (consumed) without waiting: a FIFO no
    one reads is refused (``ENXIO``), not waited for; blocking again unless ``flags`` ask otherwise.
    Where there is no ``/proc``, opened again by its name in its directory (``at``)."""
    try:
        try:
            fd = os.open(f"/proc/self/fd/{probe}", flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = _reopen_at(probe, flags, shown, at)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(os.fstat(probe).st_mode):
            raise OSError(errno.ENXIO, f"{shown} is a FIFO that no process has open for reading") from None
        raise
    finally:
        os.close(probe)
    if not flags & os.O_NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def _reopen_at(probe: int, flags: int, shown: str, at: tuple[int, str] | None) -> int:
    """``reopen``'s open without ``/proc``: a directory through its own handle; a file by its
    name (``O_NOFOLLOW``), refused unless it is still the file judged (its device and inode)."""
    mode = flags | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    judged = os.fstat(probe)
    if stat.S_ISDIR(judged.st_mode):
        return os.open(".", mode, dir_fd=probe)
    if at is None:
        raise FileNotFoundError(errno.ENOENT, f"{shown} cannot be opened again without /proc")
    fd = os.open(at[1], mode | os.O_NOFOLLOW, dir_fd=at[0])
    found = os.fstat(fd)
    if (found.st_dev, found.st_ino) != (judged.st_dev, judged.st_ino):
        os.close(fd)
        raise UnsafePath(f"{shown} was replaced while it was judged")
    return fd
