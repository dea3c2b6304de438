"""What a capture file lacks of its stream, in words: where the stream's dropped bytes were
(before the file, after it, or at a point inside it), read from the stream ranges the file
holds (``events.kept``), and why it lacks them (``events.cuts.reason``). The batch's list, its
JUnit file and the report's pages say it beside a capture's path or its last lines."""

from __future__ import annotations

from .cuts import reason
from .render import size as size_words


def gaps(kept: tuple | None, bytes_seen: int | None) -> list[tuple[int, int]]:
    """Where the stream's dropped bytes were: (file offset, bytes dropped there), from the
    stream ranges the file holds in file order (``events.kept.ranges``)."""
    found: list[tuple[int, int]] = []
    if not kept and not bytes_seen:
        return found
    at = end = 0
    for start, stop in kept or ():
        if start > end:
            found.append((at, start - end))
        at, end = at + stop - start, stop
    if bytes_seen is not None and bytes_seen > end:
        found.append((at, bytes_seen - end))
    return found


def dropped_note(found: list[tuple[int, int]], file_size: int) -> str | None:
    """What the file lacks of its stream, in words: ``the stream's last 4.8 KiB are not in the
    file`` (it once said they "were dropped after the file", as if something came after it)."""
    words = []
    for at, count in found:
        if at == 0 and file_size:
            words.append(f"the stream's first {size_words(count)} are not in the file")
        elif at >= file_size:
            words.append(f"the stream's last {size_words(count)} are not in the file")
        else:
            words.append(f"{size_words(count)} of the stream are not in the file, after its first {size_words(at)}")
    return "; ".join(words) or None


def kept_ranges(
    stream: str, captured, run_id: str | None, capture_path: str | None = None, *, inside: str | None = None
) -> tuple | None:
    """The stream ranges the capture file of ``captured`` holds (a summary line's ``Captured``,
    or a ``CapturedStream``), read with the record its run left beside the file
    (``events.kept.ranges``; ``capture_path``, default the recorded path, relative to ``inside``
    when given: read inside that directory as ``report.tail.read_tail`` reads), so a file that
    keeps the stream's head is never taken for its end. None when the counts are missing."""
    from .kept import ranges
    from .types import CapturedStream

    seen, written, path = captured.bytes_seen, captured.bytes_written, capture_path or captured.path
    if type(seen) is not int or type(written) is not int or not path:
        return None
    captured = CapturedStream(stream, path, seen, written, captured.sha256 or "", True, False)
    return ranges(captured, run_id, path, inside=inside)


def cut_note(stream: str, captured, run_id: str | None) -> str | None:
    """What a capture file lacks of its stream, in words, after why (``cuts.reason``, the cap
    named as a batch's manifest key), with how much of it the file holds, and, where the cap
    dropped the stream's end, the keep that holds it too; None when it holds it whole."""
    cause = reason(captured.write_error, captured.truncated, "capture_max_bytes", None)
    kept = kept_ranges(stream, captured, run_id) if cause else None
    if cause is None or kept is None:
        return None
    found = gaps(kept, captured.bytes_seen)
    lacks = dropped_note(found, captured.bytes_written)
    if lacks and not cause.failed and found[-1][0] >= captured.bytes_written:
        lacks += f" ({HEAD_HINT})"  # a head keep: a test's failing assertion, printed last, is gone
    written, seen = size_words(captured.bytes_written), size_words(captured.bytes_seen)
    return f"{cause.words}: {written} of {seen} kept: {lacks}" if lacks else None


# Said where the cap kept the stream's head (``capture_keep`` head, the default) and dropped its end.
HEAD_HINT = "capture_keep head-tail keeps the end too"
