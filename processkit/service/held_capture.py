"""A run's capture held in a memfd (a scratch capture beside a held stream: ``service.request``),
into its reply: inline when small, else copied to a file of the request's in the service's scratch
directory, a piece a turn of the service's loop (``scratch.copy_out``), which the caller reads once
and removes (``api.streams``)."""

from __future__ import annotations

import contextlib
import os

from ..api import wire
from . import scratch

# A scratch capture larger than this is not copied into the reply: the caller reads the file
# itself (one copy of the output in memory, as subprocess's, not four across the two processes).
INLINE_MOST = 1 << 20


def copied(report: dict, name: str, fd: int, directory: str, most: int | None):
    """``yield from`` this: the capture ``name`` held in ``fd``, into ``report``, never past the ``most``
    bytes the run wrote there: inline up to ``INLINE_MOST``, else copied in the kernel (``sendfile``,
    never through this process's memory) to ``{name}.log`` in ``directory`` (the request's, in the scratch
    directory), which the caller reads once (at most that count) and removes (``scratch.not_copied``
    where it has no room). Whatever ends the copy otherwise (a bug, the host's teardown) leaves no
    half-written file, and is raised."""
    try:
        size = min(os.fstat(fd).st_size, most or 0)
    except OSError:
        return
    if size <= INLINE_MOST:
        report[name] = wire.read_back(fd, most=size)
        return
    path = os.path.join(directory, f"{name}.log")
    try:
        os.makedirs(directory, 0o700, exist_ok=True)
        yield from scratch.copy_out(fd, path, size)
    except BaseException as exc:  # this stream's file only (the other's, copied already, is in the reply)
        for undo, made in ((os.unlink, path), (os.rmdir, directory)):  # the directory once empty
            with contextlib.suppress(OSError):
                undo(made)
        if not isinstance(exc, OSError):
            raise
        scratch.not_copied(report, name, fd, size, f"{os.path.dirname(directory)}: {exc.strerror}")  # inline, or said
        return
    report[f"{name}_file"] = path  # read and removed by the caller (``api.streams``)
    report[f"{name}_most"] = size
