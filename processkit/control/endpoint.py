"""Where a run's control socket lives, and the one path shape ``prune`` may reap
(docs/control-plane.md §1.1, §2.6).

The socket sits in a fresh 0700 ``<base>/pkc-<token>/`` directory, independent of the registry
so the path stays short enough for ``sun_path``. A directory that already exists is never
adopted: only one this process just created can hold its socket.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import time

SOCKET_NAME = "c.sock"
DIR_PREFIX = "pkc-"
DIR_ATTEMPTS = 16
_TOKEN = re.compile(r"[A-Za-z0-9-]+")
_sequence = itertools.count()


def socket_base() -> str:
    """``/tmp``, or the platform temp directory where ``/tmp`` is not a directory."""
    if os.path.isdir("/tmp"):
        return "/tmp"
    return os.environ.get("TMPDIR") or "/tmp"


def make_socket_dir() -> str:
    """A newly created 0700 directory for one socket; raises OSError."""
    base = socket_base()
    for _ in range(DIR_ATTEMPTS):
        path = os.path.join(base, f"{DIR_PREFIX}{os.getpid()}-{time.time_ns():x}-{next(_sequence):x}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no fresh socket directory under {base} after {DIR_ATTEMPTS} attempts")


def reapable_dir(endpoint: str | None) -> str | None:
    """The socket directory ``endpoint`` names, if it has exactly the shape a runner creates:
    ``<base>/pkc-<token>/c.sock`` taken as written, with ``<base>`` the socket base."""
    if not endpoint:
        return None
    directory, name = os.path.split(endpoint)
    base, dirname = os.path.split(directory)
    if (
        name != SOCKET_NAME
        or base != socket_base()
        or not dirname.startswith(DIR_PREFIX)
        or not _TOKEN.fullmatch(dirname[len(DIR_PREFIX) :])
        or endpoint != f"{base}/{dirname}/{SOCKET_NAME}"
    ):
        return None
    return directory


def reap(endpoint: str | None) -> None:
    """Remove a dead run's socket and its (then empty) directory, best effort, touching only
    a socket inside a real (not symlinked) directory of the expected shape."""
    directory = reapable_dir(endpoint)
    if directory is None:
        return
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if stat.S_ISSOCK(os.stat(SOCKET_NAME, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            os.unlink(SOCKET_NAME, dir_fd=dir_fd)
        os.rmdir(directory)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
