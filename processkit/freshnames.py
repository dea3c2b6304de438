"""The files writers killed between making a fresh name and renaming it over the real one left
(SIGKILL, an OOM kill: no clean-up ran), and their removal: nothing else would ever remove them.
One sweep for every writer that makes such names (``capture_layout``'s record and marks,
``cli/bundlewrite``'s bundle, ``useroutputs``' replaced outputs), each telling its own names. Only ``os`` and ``stat`` are
imported: the bundle's writer runs it at a run's exit.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

# How old a fresh name must be before it is taken for a leftover: a write takes well under a
# second, and another writer into the same directory may be filling its own now.
STALE_SECONDS = 60.0


def sweep(
    directory: str | int, made: Callable[[str], bool], now: float | None = None, *, private: bool = False
) -> None:
    """Remove the names in ``directory`` that ``made`` says a writer makes, each only when it is
    a regular file of this user's, untouched for ``STALE_SECONDS`` by ``now`` (the file system's
    clock read off a file just written; None: ``time.time()``), with no other link unless
    ``private``: a link planted under a writer's name is another user's doing, and ``private``
    sweeps only a directory of this user's that no one else can write, itself no link. Through
    one descriptor of the directory (``directory`` may be one the caller holds and keeps: a writer
    that reached its directory through ``safepath``); best effort: a directory this user cannot
    list (mode 0300), a file gone meanwhile or refused, is left as it is."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if private else 0)
    try:
        # A held descriptor may be ``O_PATH`` (``safepath``'s), which cannot be listed: reopen it.
        dir_fd = os.open(".", flags, dir_fd=directory) if isinstance(directory, int) else os.open(directory, flags)
    except OSError:
        return
    try:
        if private:
            held = os.fstat(dir_fd)
            if held.st_uid != os.geteuid() or held.st_mode & 0o022:
                return
        names = [name for name in os.listdir(dir_fd) if made(name)]
        if not names:
            return
        if now is None:
            import time

            now = time.time()
        for name in names:
            try:
                found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if (
                    stat.S_ISREG(found.st_mode)
                    and found.st_uid == os.geteuid()
                    and (private or found.st_nlink == 1)
                    and now - found.st_mtime > STALE_SECONDS
                ):
                    os.unlink(name, dir_fd=dir_fd)
            except OSError:
                continue
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def fresh_of(entry: str, prefix: str, sep: str | None, digits: int = 8, suffix: str = ".tmp") -> bool:
    """Whether ``entry`` is ``<prefix><pid><sep><digits hex digits><suffix>`` (no pid nor ``sep``
    when ``sep`` is None): each writer's own fresh names, told apart from its neighbours'."""
    if not entry.startswith(prefix) or not entry.endswith(suffix) or len(entry) < len(prefix) + len(suffix):
        return False
    tail = entry[len(prefix) : len(entry) - len(suffix)]
    if sep is not None:
        pid, _, tail = tail.partition(sep)
        if not pid.isdigit():
            return False
    from .rundir import HEX_DIGITS  # for such a name alone

    return len(tail) == digits and HEX_DIGITS.issuperset(tail)
