"""A control socket's address that fits a Unix socket address, whatever its path's length
(docs/control-plane.md §1.1).

Facts that shape it:
- ``sun_path`` holds 108 bytes on Linux, its terminating NUL among them: a batch job's socket
  in a deep ``$XDG_RUNTIME_DIR`` (a container's, a test harness's) has a path past that, and
  both ``bind`` and ``connect`` refuse it (``ENAMETOOLONG``).
- The kernel resolves an address as any path, so ``/proc/self/fd/<N>/<name>``, ``N`` a handle on
  the socket's directory, reaches the same file through a short address; no ``chdir`` is needed
  (the runner's working directory is no one else's business, and stays its own).
- That handle is walked under ``safepath``'s rules for a private directory (this user's own,
  not a link, on a path only this user and root can change), so the long path follows no
  other user's link: the socket's directory is a run's fresh 0700 one, in such a base.
- A path that fits is used as it is: most runs pay nothing.
"""

from __future__ import annotations

import errno
import os

SUN_PATH = 108  # Linux's ``sun_path``, its terminating NUL included


def reachable(path: str) -> tuple[str, int | None]:
    """An address for the socket at ``path`` and the handle it goes through (None: ``path``
    itself), to close once bound or connected; raises OSError (``UnsafePath`` included)."""
    if len(os.fsencode(path)) < SUN_PATH:
        return path, None
    from ..safepath import private_directory

    directory, name = os.path.split(path)
    fd = private_directory(directory, create=False)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), directory)
    return f"/proc/self/fd/{fd}/{name}", fd


def release(handle: int | None) -> None:
    """Close what ``reachable`` opened, if anything."""
    if handle is not None:
        os.close(handle)
