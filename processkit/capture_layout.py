"""``capture-keep.json``: which byte ranges of each stream a ring capture's files hold.

``output_captured`` cannot say it (the v1 schema allows no added field in a stream's object, nor
in the event), so a run with ``--capture-keep tail`` or ``head-tail`` writes this file beside
``stdout.log`` and ``stderr.log`` just before the event: per stream the digest and counts the
event reports and ``kept``, the stream's ``[start, end)`` byte ranges in file order. A head run
writes none (its file is the stream's first ``bytes_written`` bytes). Readers (``events.kept``, for
``report``, ``events`` and the Python API) take it only when its run id, digest and count match the stream they read, so a
file left by an earlier run in the same directory is never applied to another run's files; a
capture without a matching record is read as a head capture.
"""

from __future__ import annotations

import os

from .diagnostics import warn
from .jsontext import dumps

NAME = "capture-keep.json"
VERSION = 1
MAX_BYTES = 64 * 1024


def record(directory: str, run_id: str, keep: str, reports: dict) -> None:
    """Write the layout of ``reports`` (stream name -> the engine's CaptureReport) beside the
    capture files; best effort (a warning when it cannot)."""
    caps = {report.cap for report in reports.values()}
    document: dict = {"layout_version": VERSION, "run_id": run_id, "keep": keep, "cap": caps.pop() if caps else None}
    for name, report in reports.items():
        document[name] = {
            "sha256": report.sha256,
            "bytes_seen": report.bytes_seen,
            "bytes_written": report.bytes_written,
            "kept": [list(span) for span in report.kept],
        }
    path = os.path.join(directory, NAME)
    # Never through a link, never into a FIFO or device, never another user's file (emptied only
    # once it is known to be this user's own regular file).
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
        try:
            import stat

            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise OSError(f"{path} is not a regular file of this user's")
            os.ftruncate(fd, 0)
            os.write(fd, (dumps(document) + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        warn(f"could not record which part of each stream the capture files keep: {exc.strerror or exc}")
