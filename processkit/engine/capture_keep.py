"""``--capture-keep tail`` and ``head-tail``: the ring at a capture file's end, put in order
once the stream ends, and hashed.

Facts that shape it:
- Memory stays bounded by a chunk, whatever the cap: the ring lives in the file itself. Both
  pumps write a stream byte at position ``p >= head`` to file offset
  ``head + (p - head) % ring`` (csrc/pump.c and capture.CaptureFile alike), so once the stream
  has wrapped the ring its oldest byte sits at ``head + (stored - head) % ring``.
- Putting the ring in order is a left rotation of ``[head, cap)``, done in place by three
  chunked reversals (the file keeps its inode: whoever opened it still reads the right file),
  reading and writing the ring twice; a digest cannot be streamed while bytes are overwritten,
  so it is taken by reading the finished file back. Should putting it in order fail, the file
  is emptied, so that it still holds exactly what the report says (nothing, ``write_error``).
- A ring is rewritten in place, so it needs a regular file the runner can also read: a FIFO or
  a device there gets nothing written and ``write_error`` from the first byte. The read side is
  the same open file (``readback.same_file``: the runner opened one it made read-write, so
  a umask that leaves it unreadable or read-only, ``0o477`` or ``0o277``, refuses no ring).
- ``output_captured`` has no room for which part a file holds (the v1 schema allows no added
  field there), so the stream ranges kept go to ``capture-keep.json`` beside the files
  (``processkit/capture_layout.py``, docs/events.md).
"""

from __future__ import annotations

import os

from ..capture_layout import kept_ranges
from .waits import Wait

CHUNK = 1 << 20


def _reopen(fd: int) -> int:
    from ..readback import same_file  # a ring's only: a plain run loads none

    return same_file(fd, os.O_RDWR)


def ring_ready(capture_fd: int) -> bool:
    """Whether the capture file can hold a ring: a regular file the runner may read back."""
    import stat

    try:
        fd = _reopen(capture_fd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def finish(
    capture_fd: int, head: int, cap: int, stored: int, ring_from: int, write_error: bool
) -> tuple[int, str, bool, tuple[tuple[int, int], ...]]:
    """``finishing`` done at once, for a caller outside a run's steps."""
    work = finishing(capture_fd, head, cap, stored, ring_from, write_error)
    while True:
        try:
            next(work)
        except StopIteration as done:
            return done.value


def finishing(capture_fd: int, head: int, cap: int, stored: int, ring_from: int, write_error: bool):
    """A ring capture finished: the ring rotated into stream order, the file cut to the bytes
    it holds (only a write error leaves it longer), then hashed. Returns the bytes the file
    holds, their digest, whether a write failed, and the stream ranges kept.

    A run's steps (``yield from``): the rotation and the hash move the whole ring, so they give
    up the host's loop after every ``TURN_BYTES`` moved, and the other runs' deadlines and pipes
    are served in between."""
    import hashlib

    ring = cap - head
    kept = kept_ranges(head, ring, stored, ring_from)
    written = sum(end - start for start, end in kept)
    digest = hashlib.sha256()
    if not stored:
        return written, digest.hexdigest(), write_error, kept
    try:
        fd = _reopen(capture_fd)
        try:
            filled = min(ring, os.fstat(fd).st_size - head)
            first = (max(ring_from, stored - ring) - head) % ring if ring else 0
            if filled > 0 and first:
                yield from _rotate(fd, head, head + filled, head + first)
            if os.fstat(fd).st_size > written:
                os.ftruncate(fd, written)
            yield from _hash(fd, written, digest)
        finally:
            os.close(fd)
    except OSError:
        # What the file holds is no longer known: emptied, it holds what the report says.
        try:
            os.ftruncate(capture_fd, 0)
        except OSError:
            pass
        return 0, hashlib.sha256().hexdigest(), True, ()
    return written, digest.hexdigest(), write_error, kept


TURN_BYTES = 16 * CHUNK  # moved (read or written) between two looks at the loop


def _turn():
    """Give up the loop for one turn (a wait that already holds)."""
    yield Wait(_always)


def _always() -> bool:
    return True


def _rotate(fd: int, start: int, end: int, middle: int):
    """Bytes [start, end) rotated so the byte at ``middle`` comes first."""
    yield from _reverse(fd, start, middle)
    yield from _reverse(fd, middle, end)
    yield from _reverse(fd, start, end)


def _reverse(fd: int, low: int, high: int):
    moved = 0
    while high - low > 1:
        size = min(CHUNK, (high - low) // 2)
        front, back = _read(fd, size, low), _read(fd, size, high - size)
        _write(fd, back[::-1], low)
        _write(fd, front[::-1], high - size)
        low, high = low + size, high - size
        moved += 4 * size
        if moved >= TURN_BYTES:
            moved = 0
            yield from _turn()


def _read(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:  # the file shrank under the runner
        raise OSError(5, "short read")
    return data


def _write(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        count = os.pwrite(fd, view, offset)
        if count == 0:
            raise OSError(5, "short write")
        view, offset = view[count:], offset + count


def _hash(fd: int, size: int, digest):
    offset = moved = 0
    while offset < size:
        data = os.pread(fd, min(CHUNK, size - offset), offset)
        if not data:
            raise OSError(5, "short read")
        digest.update(data)
        offset += len(data)
        moved += len(data)
        if moved >= TURN_BYTES:
            moved = 0
            yield from _turn()
