"""The run's byte-code bundle written to its file (``cli/quickimport.py`` reads it, and decides when
it must be written again). Apart from the reader so that a run whose bundle is current, the
common case, neither loads nor unmarshals this code."""

from __future__ import annotations

from _frozen_importlib_external import MAGIC_NUMBER
from marshal import dumps
from posix import O_CLOEXEC, O_CREAT, O_EXCL, O_WRONLY, close, getpid, rename, stat, unlink, urandom
from posix import open as open_fd

from ..writeall import write_all


def write(path: str, rows: tuple) -> None:
    """The interpreter's magic number and one marshal of ``rows``, put at ``path`` whole or not
    at all (a temporary file renamed over it); best effort: a read-only install keeps none."""
    temporary = f"{path}-{getpid()}-{urandom(4).hex()}.tmp"  # MANIFEST.in keeps a leftover out of an sdist
    try:
        data = MAGIC_NUMBER + dumps(rows)
        mode = stat(__file__).st_mode & 0o666  # as a pyc takes its source's: no wider than the code
        fd = open_fd(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    except (OSError, ValueError):
        return
    try:
        write_all(fd, data)
        close(fd)
        fd = -1
        rename(temporary, path)
    except BaseException:  # noqa: BLE001 - a write error, or a signal at the run's exit: no file left, exit kept
        if fd >= 0:
            close(fd)
        try:
            unlink(temporary)
        except OSError:
            pass
