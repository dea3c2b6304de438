"""``capture-keep.json``: which byte ranges of each stream a ring capture's files hold.

``output_captured`` cannot say it (the v1 schema allows no added field in a stream's object, nor
in the event), so a run with ``--capture-keep tail`` or ``head-tail`` writes this file beside
``stdout.log`` and ``stderr.log`` just before the event: per stream the digest and counts the
event reports and ``kept``, the stream's ``[start, end)`` byte ranges in file order. A head run
writes none (its file is the stream's first ``bytes_written`` bytes). Readers (``report``, the
Python API) take it only when its run id, digest and count match the stream they read, so a
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


def kept(record: dict, stream: str, run_id: str | None, capture_path: str | None = None) -> tuple | None:
    """The stream's ``(start, end)`` ranges a capture file holds, from ``output_captured``'s
    ``record`` of ``stream``: the ranges this run recorded beside the file (``capture_path``,
    default the recorded one), else its first ``bytes_written`` bytes. None when the record
    lacks the counts."""
    seen, written = record.get("bytes_seen", record.get("bytes")), record.get("bytes_written")
    if type(seen) is not int or type(written) is not int or not 0 <= written <= seen:
        return None
    spans = recorded(record, stream, run_id, capture_path)
    if spans is not None:
        return spans
    return ((0, written),) if written else ()


def recorded(record: dict, stream: str, run_id: str | None, capture_path: str | None = None) -> tuple | None:
    """The ranges a ring run recorded for this stream, or None (nothing was dropped, or no
    matching record: no such file, another run's, or not well formed). The file comes from a
    directory a stream names: it is opened without blocking and read only when it is a small
    regular file."""
    import json
    import stat

    seen, written = record.get("bytes_seen", record.get("bytes")), record.get("bytes_written")
    capture_path = capture_path if capture_path is not None else record.get("path")
    if type(seen) is not int or not isinstance(capture_path, str):
        return None
    if seen == written and not record.get("write_error"):
        return None
    path = os.path.join(os.path.dirname(capture_path), NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        document = json.loads(os.read(fd, MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    finally:
        os.close(fd)
    if not isinstance(document, dict) or document.get("layout_version") != VERSION:
        return None
    entry = document.get(stream)
    if document.get("run_id") != run_id or not isinstance(entry, dict):
        return None
    if entry.get("sha256") != record.get("sha256") or entry.get("bytes_seen") != seen:
        return None
    spans = _spans(entry.get("kept"), seen)
    return spans if spans is not None and sum(b - a for a, b in spans) == written else None


def _spans(value: object, bytes_seen: int) -> tuple | None:
    """Ascending, disjoint ranges within the stream."""
    if not isinstance(value, list):
        return None
    spans, end = [], 0
    for span in value:
        if not (isinstance(span, list) and len(span) == 2 and all(type(n) is int for n in span)):
            return None
        if not end <= span[0] < span[1] <= bytes_seen:
            return None
        spans.append((span[0], span[1]))
        end = span[1]
    return tuple(spans)
