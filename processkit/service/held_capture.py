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


def _recorded(outcome, name: str) -> dict:
    """``name``'s part of the run's ``output_captured`` as the engine reported it (remembered:
    ``REMEMBER``, in this process's memory), else {}."""
    event = outcome.remembered.get("output_captured") if outcome.remembered else None
    stream = event.get(name) if isinstance(event, dict) else None
    return stream if isinstance(stream, dict) else {}


def written(outcome, name: str) -> int | None:
    """The bytes the run wrote to ``name``'s capture, as the engine reported them; None when it reported none."""
    count = _recorded(outcome, name).get("bytes_written")
    return count if type(count) is int and count >= 0 else None


def vouched(report: dict, outcome, name: str) -> None:
    """The SHA-256 the engine recorded for ``name``'s scratch capture into the reply (``{name}_sha256``),
    from its own record: not ``jsonl=``'s file read back, nor a capture file, which any process of the
    user's may rewrite. The caller checks every scratch capture it is given against it, inline or read
    by its path (``api.streams``)."""
    digest = _recorded(outcome, name).get("sha256")
    if isinstance(digest, str):
        report[f"{name}_sha256"] = digest
