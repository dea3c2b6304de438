"""One whole buffer written to a blocking descriptor (a file, a memfd, a pipe a reader drains).

``os.write`` may write less than it is given, and says so only in its count: a regular file
past ``RLIMIT_FSIZE`` (``ulimit -f``) or a full file system takes a part and refuses the rest
on the next write, and any single write stops at 2 GiB. A caller that ignores the count cuts
its data silently (a run's ``input=`` reached its child short, with returncode 0). So every
whole buffer goes through ``write_all``: it loops on the count, and a write that cannot
complete raises ``OSError`` (the kernel's own error, or ``EIO`` for a write that took nothing),
never returns having written less.
"""

from __future__ import annotations

import errno
import os

MAX_WRITE = 1 << 30  # one write at most: Linux caps each at 2 GiB less a page anyway


def write_all(fd: int, data: bytes | bytearray | memoryview, stall: float | None = None) -> None:
    """Write all of ``data`` to ``fd`` (blocking), or raise OSError. A non-blocking descriptor (a
    standard stream whose pipe a Node.js or CI parent shares and made so; a FIFO opened so that
    its open does not wait) is waited on as a blocking write would wait: its EAGAIN is no error
    and no end; with ``stall``, a reader that takes nothing for that many seconds fails the
    write (``ETIMEDOUT``: ``useroutputs``' outputs, which never hang on another's FIFO)."""
    view = memoryview(data).cast("B")
    while view:
        try:
            count = os.write(fd, view[:MAX_WRITE])
        except BlockingIOError:
            if not _until_writable(fd, stall):
                raise OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s") from None
            continue
        if count <= 0:
            raise OSError(errno.EIO, "the write took nothing")
        view = view[count:]


def _until_writable(fd: int, stall: float | None) -> bool:
    """Whether ``fd`` polled writable (or in error, or hung up: the next write says which)
    within ``stall`` seconds (None: however long it takes)."""
    import select  # only for a non-blocking descriptor, which few writes meet

    waiting = select.poll()
    waiting.register(fd, select.POLLOUT)
    return bool(waiting.poll(None if stall is None else int(stall * 1000)))
