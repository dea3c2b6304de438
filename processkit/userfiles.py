"""Files a user names, read: an input opened (``open_input``; ``open_judged``, judged as
``bounded`` judges; ``open_named``, a file read where another user may have left links: a batch's
summary, ``--history``, a stream's capture in a directory given), never through a path another
user controls (``safepath``'s rules) and never waiting in ``open()``. The walk to a name's last
entry is ``userwalk``'s (``final_entry``), which ``useroutputs`` (the files a user names, written)
reaches its outputs by too.

``open()`` of a FIFO waits for its other end, and no timer or signal handler that returns ends
that wait. An ``O_PATH`` open names the inode without opening it: nothing waits and no device is
touched. So the entry is reached by ``safepath``'s walk, opened ``O_PATH``, judged by ``fstat``,
and only then opened for real with ``O_NONBLOCK``, through ``/proc/self/fd/N`` (or, with no
``/proc``, by its name in the held directory with ``O_NOFOLLOW``, checked to be the same inode):
the file judged is the file opened.
"""

from __future__ import annotations

import errno
import os
import stat

from .bounded import Limits, checked, file_kind, never_waits
from .pathtrust import UnsafePath, others_can_change, trusted
from .pathreopen import reopen
from .safepath import directory_of, split_file
from .userwalk import final_entry, input_entry

_INPUT = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    return file_kind(mode) or "a regular file"


def open_input(path: str, *, never_wait: bool = False, others_fifo: bool = False) -> int:
    """A read-only, non-blocking descriptor on ``path`` (a FIFO's open never waits for a
    writer), reached as ``open_named`` reaches a file: another user's link at the name, or in a
    sticky directory, is refused (it would choose what is read as this user and handed to a
    child), as is a file with other hard links in a directory other users can change, and
    another user's FIFO unless ``others_fifo`` (``--stdin-file``: a wait there is ended by the
    run's timeouts); with ``never_wait``, anything but a regular file or the null device (whose
    read ends at once, ``bounded.never_waits``) is refused (OSError naming what it is). A name no file can have (empty, ending in ``/``) is refused with ``open``'s own
    words."""
    dir_fd, shown, name, entry, by_descriptor = input_entry(path)
    try:
        fd = _reopened(dir_fd, shown, name, entry, by_descriptor, os.strerror(errno.ENOENT), others_fifo=others_fifo)
    finally:
        os.close(dir_fd)
    if never_wait:
        found = os.fstat(fd)
        if not never_waits(found):
            os.close(fd)
            raise OSError(errno.EINVAL, f"it is {kind(found.st_mode)}, not a regular file or /dev/null")
    return fd


def open_judged(path: str, limits: Limits) -> int:
    """``open_input``'s descriptor, judged by ``limits`` as ``bounded`` judges (``checked``): a
    batch's argument file, manifest or job input, read as the runner's user (often root) and
    turned into jobs or digests others may see. Raises OSError (UnsafePath included) or
    ``bounded.InputError``."""
    return checked(open_input(path), path, limits)


def input_stat(path: str) -> os.stat_result:
    """What ``open_input`` would open at ``path``, reached and judged as it is (the same
    refusals), by its ``O_PATH`` handle: nothing is opened, so a device named is not touched."""
    dir_fd, shown, _, entry, by_descriptor = input_entry(path)
    try:
        return _judged(dir_fd, shown, entry, by_descriptor, os.strerror(errno.ENOENT))
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(dir_fd)


def own_stream(path: str) -> int | None:
    """The standard stream of this process's (0-2) that ``path`` reaches through a ``/proc``
    descriptor link (a link to ``/dev/stdin``, ``/dev/fd/1``), walked as ``open_input`` walks
    it: another process opening ``path`` reaches its own there (a detached copy's, the API
    service's /dev/null). None for a file reached by its name, and where the walk is refused
    (another user's link at the name) or fails: the opener's to say, in its own words."""
    try:
        dir_fd, _, _, entry, by_descriptor = input_entry(path)
    except (OSError, ValueError):
        return None
    try:
        if not by_descriptor:
            return None
        found = os.fstat(entry)
        for fd in range(3):
            try:
                own = os.fstat(fd)
            except OSError:  # closed
                continue
            if (own.st_dev, own.st_ino) == (found.st_dev, found.st_ino):
                return fd
        return None
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(dir_fd)


def _reopened(
    dir_fd: int, shown: str, name: str, entry: int, by_descriptor: bool, missing: str, *, others_fifo: bool = False
) -> int:
    """The ``final_entry`` entry ``entry`` (consumed), ``name`` in ``dir_fd``, reopened to read,
    non-blocking, once ``_judged``."""
    try:
        _judged(dir_fd, shown, entry, by_descriptor, missing, others_fifo=others_fifo)
        return reopen(os.dup(entry), _INPUT, shown, (dir_fd, name))
    finally:
        if entry >= 0:
            os.close(entry)


def _judged(
    dir_fd: int, shown: str, entry: int, by_descriptor: bool, missing: str, *, others_fifo: bool = False
) -> os.stat_result:
    """The ``final_entry`` entry ``entry``'s ``fstat`` (-1: ``FileNotFoundError`` saying ``missing``).
    Refused: a file of this user's or root's with other hard links, in a directory other users
    can change (a link they made to a file they could not read); unless ``others_fifo``, another
    user's FIFO (its holder could keep a reader waiting for ever). (A descriptor of this
    process's own that its caller did not pass was refused on the walk: ``caller_fds``.)"""
    if entry < 0:
        raise FileNotFoundError(errno.ENOENT, missing)
    found = os.fstat(entry)
    if not (by_descriptor or others_fifo) and stat.S_ISFIFO(found.st_mode) and not trusted(found.st_uid):
        raise UnsafePath(f"{shown} is a FIFO of uid {found.st_uid}: another user's FIFO is never read")
    planted = others_can_change(os.fstat(dir_fd))
    if not by_descriptor and planted and trusted(found.st_uid) and not stat.S_ISDIR(found.st_mode):
        if found.st_nlink > 1:
            raise UnsafePath(f"{shown} has other hard links, in a directory other users can change")
    return found


def open_named(path: str, limits: Limits, *, inside: str | None = None) -> int:
    """A read-only, non-blocking descriptor on the file ``path`` (relative to the directory
    ``inside`` when given), reached as an output is: another user's link at the name itself is
    never followed, nor one in a sticky directory. Inside ``inside`` (another user's batch
    directory, say) no link but this user's or root's is followed and no ``..`` is taken; and
    a file of this user's or root's with other hard links, in a directory other users can
    change, is refused (a link to a file they could not read). Then ``bounded`` judges it by
    ``limits``. Raises OSError (UnsafePath included) or ``bounded.InputError``."""
    links = [0]
    head, name = split_file(path)
    strict = inside is not None
    if inside is None:
        start, here = directory_of(links, head)
    else:
        if path.startswith("/") or ".." in path.split("/"):
            raise UnsafePath(f"{path} leads out of {inside}")
        base, base_here = directory_of(links, inside)
        try:
            start, here = directory_of(links, head, base, base_here, strict=True)
        finally:
            os.close(base)
    dir_fd, here, name, entry, by_descriptor = final_entry(links, start, here, name, strict=strict)
    shown = f"{here.rstrip('/')}/{name}"
    try:
        fd = _reopened(dir_fd, shown, name, entry, by_descriptor, f"{shown} does not exist")
    finally:
        os.close(dir_fd)
    return checked(fd, path, limits)
