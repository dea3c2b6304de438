"""Which byte ranges of a stream a capture file holds, for a captured stream of
``output_captured``: read from the ``capture-keep.json`` a ring run writes beside its files
(``capture_layout``), else the stream's first ``bytes_written`` bytes. For a ring run whose
runner was killed before its end (no ``output_captured``), ``salvage`` reads the live record and
its marks: which stream ranges the unordered ring holds and where, so that they can be read back
in stream order (``Salvage.read``).
"""

from __future__ import annotations

import os

from .. import capture_layout
from ..bounded import CAPTURE_LAYOUT, RUN_FILE, InputError, loads, open_input, read_start
from ..plain import Frozen
from .types import CapturedStream


def ranges(
    captured: CapturedStream, run_id: str | None, capture_path: str | None = None, *, inside: str | None = None
) -> tuple | None:
    """The stream's ``(start, end)`` ranges a capture file holds, for ``captured`` (a stream of
    ``output_captured``): the ranges this run recorded beside the file (``capture_path``, default
    the recorded one; relative to the directory ``inside`` when given, read as ``open_named``
    reads inside it), else its first ``bytes_written`` bytes. None when the counts are missing."""
    seen, written = captured.bytes_seen, captured.bytes_written
    if type(seen) is not int or type(written) is not int or not 0 <= written <= seen:
        return None
    spans = recorded(captured, run_id, capture_path, inside=inside)
    if spans is not None:
        return spans
    return ((0, written),) if written else ()


def recorded(
    captured: CapturedStream, run_id: str | None, capture_path: str | None = None, *, inside: str | None = None
) -> tuple | None:
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
    document = _document(os.path.dirname(capture_path), inside)
    if document is None:
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


def _small_file(path: str, limit: int, inside: str | None = None) -> bytes | None:
    """A regular file's bytes, when it is one of at most ``limit`` bytes: opened without
    blocking, as an input is (``open_input``: the path comes from a directory a stream names;
    another user's link at it refused, this user's or root's followed); with ``inside``,
    ``path`` is relative to that directory and walked from it (``open_named``: links there only
    this user's or root's; a batch's ``--out``, pinned while its page is made, never by its name again)."""
    from ..userfiles import open_named

    def opener(name: str, limits) -> int:
        return open_named(name, limits, inside=inside)

    try:
        data = read_start(path, limit + 1, CAPTURE_LAYOUT, open_input if inside is None else opener)
    except (OSError, ValueError):  # ValueError: bounded.InputError (a FIFO, a device)
        return None
    return data if len(data) <= limit else None


def _document(directory: str, inside: str | None = None) -> dict | None:
    """The layout record in ``directory`` (inside ``inside``: ``_small_file``), when it is one of this version."""
    data = _small_file(os.path.join(directory, capture_layout.NAME), capture_layout.MAX_BYTES, inside)
    if data is None:
        return None
    try:
        document = loads(data.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, or nested past bounded.MAX_DEPTH
        return None
    if not isinstance(document, dict) or document.get("layout_version") != capture_layout.VERSION:
        return None
    return document


class Salvage(Frozen):
    """What a killed ring run's capture file holds of one stream: ``ranges``, the stream's
    ``[start, end)`` ranges in stream order; ``segments``, each piece as ``(start, end, file
    offset)`` in stream order (the ring was never put in order, so a range may wrap in the
    file); ``seen``, the stream's bytes the runner had read at least; ``write_error``."""

    stream: str
    path: str
    ranges: tuple
    segments: tuple
    seen: int
    write_error: bool

    @property
    def size(self) -> int:
        return sum(end - start for start, end in self.ranges)

    def read(self, limit: int | None = None) -> bytes | None:
        """The stream bytes the file holds, in stream order (only the last ``limit`` of them when
        given); None when the file cannot be read or is shorter than its marks say. Opened as a
        report reads a capture in a directory given (``userfiles.open_named``): a regular file,
        without blocking, through no link another user made, and not a hard link of a file of
        this user's or root's in a directory others can change (one to a file they could not read)."""
        from ..userfiles import open_named

        wanted = self.size if limit is None else min(limit, self.size)
        skip = self.size - wanted
        folder, name = os.path.split(self.path)
        try:
            fd = open_named(name, RUN_FILE, inside=folder)
        except (OSError, InputError):
            return None
        parts = []
        try:
            for start, end, offset in self.segments:
                length = end - start
                if skip >= length:
                    skip -= length
                    continue
                data = os.pread(fd, length - skip, offset + skip)
                if len(data) != length - skip:
                    return None
                parts.append(data)
                skip = 0
        except OSError:
            return None
        finally:
            os.close(fd)
        return b"".join(parts)


def salvage(directory: str, run_id: str | None = None) -> dict[str, Salvage] | None:
    """The streams a ring run left in ``directory`` when its runner died before the end: read
    from the live record (``capture_layout.start``) and its marks; None when there is none, it
    is another run's (``run_id``), it was retired (the ring was being put in order), or it does
    not add up."""
    import struct

    document = _document(".", directory)  # read inside it, as its capture files are (``Salvage.read``)
    if document is None or document.get("state") != capture_layout.CAPTURING:
        return None
    recorded_id, cap, head = document.get("run_id"), document.get("cap"), document.get("head")
    if not isinstance(recorded_id, str) or (run_id is not None and recorded_id != run_id):
        return None
    if type(cap) is not int or type(head) is not int or not 0 <= head < cap:
        return None
    data = _small_file(capture_layout.MARKS_NAME, capture_layout.MARKS_SIZE, directory)
    magic = capture_layout.MAGIC
    if data is None or len(data) != capture_layout.MARKS_SIZE or not data.startswith(magic):
        return None
    if data[len(magic) : len(magic) + capture_layout.TAG_BYTES] != capture_layout.run_tag(recorded_id):
        return None
    count = capture_layout.MARK_COUNT
    counters = struct.unpack(f"={2 * count}Q", data[len(magic) + capture_layout.TAG_BYTES :])
    ring = cap - head
    found = {}
    for index, name in enumerate(capture_layout.STREAMS):
        marks = counters[index * count : (index + 1) * count]
        stored, pending = marks[capture_layout.STORED], marks[capture_layout.PENDING]
        ring_from, error = marks[capture_layout.RING_FROM], marks[capture_layout.WRITE_ERROR]
        if not (stored <= pending and head <= ring_from and error in (0, 1)):
            return None
        if not error:
            # A chunk being stored when the runner died may have overwritten the ring's oldest
            # bytes as far as its announced end: those are left out.
            ring_from = max(ring_from, pending - ring)
        ranges = capture_layout.kept_ranges(head, ring, stored, ring_from)
        path = os.path.join(directory, capture_layout.FILE_NAMES[name])
        found[name] = Salvage(name, path, ranges, _segments(ranges, head, ring), pending, bool(error))
    return found


def _segments(ranges: tuple, head: int, ring: int) -> tuple:
    """Where each stream range lies in an unordered ring file: byte p < head at offset p, and
    p >= head at head + (p - head) % ring, split where the ring wraps."""
    pieces = []
    for start, end in ranges:
        if start < head:
            pieces.append((start, min(end, head), start))
            start = min(end, head)
        while start < end:
            offset = head + (start - head) % ring
            stop = min(end, start + head + ring - offset)
            pieces.append((start, stop, offset))
            start = stop
    return tuple(pieces)
