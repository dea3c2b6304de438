"""Which byte ranges of a stream a capture file holds, for a captured stream of
``output_captured``: read from the ``capture-keep.json`` a ring run writes beside its files
(``capture_layout``), else the stream's first ``bytes_written`` bytes.
"""

from __future__ import annotations

import os

from .. import capture_layout
from ..bounded import CAPTURE_LAYOUT, loads, read_start
from .types import CapturedStream


def ranges(captured: CapturedStream, run_id: str | None, capture_path: str | None = None) -> tuple | None:
    """The stream's ``(start, end)`` ranges a capture file holds, for ``captured`` (a stream of
    ``output_captured``): the ranges this run recorded beside the file (``capture_path``, default
    the recorded one), else its first ``bytes_written`` bytes. None when the counts are missing."""
    seen, written = captured.bytes_seen, captured.bytes_written
    if type(seen) is not int or type(written) is not int or not 0 <= written <= seen:
        return None
    spans = recorded(captured, run_id, capture_path)
    if spans is not None:
        return spans
    return ((0, written),) if written else ()


def recorded(captured: CapturedStream, run_id: str | None, capture_path: str | None = None) -> tuple | None:
    """The ranges a ring run recorded for this stream, or None (nothing was dropped, or no
    matching record: no such file, another run's, or not well formed). The file comes from a
    directory a stream names: it is opened without blocking and read only when it is a small
    regular file."""
    seen, written = captured.bytes_seen, captured.bytes_written
    capture_path = capture_path if capture_path is not None else captured.path
    if type(seen) is not int or not isinstance(capture_path, str):
        return None
    if seen == written and not captured.write_error:
        return None
    path = os.path.join(os.path.dirname(capture_path), capture_layout.NAME)
    try:
        data = read_start(path, capture_layout.MAX_BYTES + 1, CAPTURE_LAYOUT)  # not a link, FIFO or device
        if len(data) > capture_layout.MAX_BYTES:
            return None
        document = loads(data.decode("utf-8"))
    except (OSError, ValueError):  # bounded.InputError, UnicodeDecodeError, not JSON
        return None
    if not isinstance(document, dict) or document.get("layout_version") != capture_layout.VERSION:
        return None
    entry = document.get(captured.stream)
    if document.get("run_id") != run_id or not isinstance(entry, dict):
        return None
    if entry.get("sha256") != captured.sha256 or entry.get("bytes_seen") != seen:
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
