"""The runner service's scratch: its directory in the batch base (made fresh, the directories of
services that died without removing theirs swept first), and the files of the runs it carried:
their sizes, and a large capture copied out (a file is read back whole by ``api.wire.read_back``,
the caller's idiom too)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

SCRATCH_PREFIX = "processkit-api-"  # a service's scratch directory: processkit-api-<pid>-<random>


def make(base: str) -> str:
    """A fresh 0700 scratch directory of this service's in ``base``."""
    _sweep(base)
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base)


def _sweep(base: str) -> None:
    """Remove the scratch directories of this user's services that are gone: one killed itself
    (SIGKILL, the OOM killer) could not remove its own, and nothing else knows it. A directory
    whose service's pid is alive, or that is not this user's, is left alone."""
    try:
        names = [name for name in os.listdir(base) if name.startswith(SCRATCH_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        path = os.path.join(base, name)
        try:
            found = os.lstat(path)
        except OSError:
            continue
        if not pid.isdigit() or not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's process with that pid): never swept
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def size(path: str) -> int:
    """The size of a run's capture file, 0 when it cannot be read."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def copy_out(source: int, path: str, size: int) -> None:
    """``size`` bytes of the memfd ``source`` into a new file ``path`` (never one that exists),
    copied by the kernel (``sendfile``): the bytes never pass through this process. Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        offset = 0
        while offset < size:
            sent = os.sendfile(fd, source, offset, size - offset)
            if not sent:
                break
            offset += sent
    finally:
        os.close(fd)
