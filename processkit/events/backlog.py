"""A JSONL stream's writes that its pipe could not take whole: the backlog of a deferred stream
and the wait of one written alone (``events/emitter.py``'s module docstring says the rules).

Apart from the emitter because a plain run never meets them: its stream is a file, or a pipe
whose reader keeps up, so its every write is taken whole. Imported by the first write that is
not, and every run's byte-code bundle is without this code (bench/README.md, "Start-up (issue 49,
start56)").
"""

from __future__ import annotations

import errno
import os
import select
import time

from ..writeall import write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .pipe_room import Watch

# The bytes a deferred stream (``Emitter.defer``) may fall behind its pipe's reader: past them
# the reader counts as stalled, and the stream fails (memory stays bounded; nothing is dropped
# from the middle: what reached the reader is the stream's beginning, in order).
BACKLOG_MOST = 1 << 20


def append(emitter, data: bytes | memoryview, stall: float) -> None:
    """A line of a stream already behind its reader (after what waits, in order), of a deferred
    stream into a FIFO past PIPE_BUF, or the rest of one its pipe took only part of: in
    ``push``'s whole lines, never cut where the pipe fills (``pipe_room``), pushed on as soon as
    the reader makes room."""
    if not emitter._backlog:
        emitter._taken_at = time.monotonic()
    emitter._backlog += data
    push(emitter, stall)
    arm(emitter, stall)


def rest(emitter, line: memoryview, stall: float) -> None:
    """The rest of a line the pipe took only part of: a deferred stream's backlog (``append``),
    the pipe watched on its loop while anything waits; else written here, waiting for the reader
    up to ``stall`` seconds each time (the emitter's ``STALL_SECONDS``, as each function here
    takes it), by poll, which any descriptor number takes (a batch's or the API service's may be
    past 1024, where ``select.select`` raises ValueError)."""
    if emitter._defer is not None:
        append(emitter, line, stall)
        return
    write_all(emitter._fd, line, stall)  # raises OSError; the stream fails, so its count no longer matters
    emitter.sent += len(line)


def room(emitter, stall: float) -> Watch:
    """The backlog's pipe on ``defer``'s loop (``pipe_room.Watch``), made at its first backlog."""
    if emitter._watch is None:
        from .pipe_room import Watch

        assert emitter._defer is not None, "only a deferred stream keeps a backlog"
        # a long line waits half the stall at most for an empty pipe: looks left before the stall
        emitter._watch = Watch(emitter._defer, emitter._fd, emitter.drained, stall / 2)
    return emitter._watch


def arm(emitter, stall: float) -> None:
    if emitter._backlog:
        room(emitter, stall).arm()


def push(emitter, stall: float) -> None:
    """As much of the backlog as the pipe takes now, in writes that each end at a line boundary
    within PIPE_BUF, so each is atomic on a pipe (a longer line goes alone, as the per-event write
    sends it, and only into an empty pipe); raises OSError once its reader counts as stalled
    (nothing taken for ``stall`` seconds, or BACKLOG_MOST bytes behind)."""
    backlog = emitter._backlog
    while backlog:
        cut = backlog.rfind(b"\n", 0, select.PIPE_BUF) + 1 or backlog.find(b"\n") + 1 or len(backlog)
        if cut > select.PIPE_BUF and room(emitter, stall).waits(cut):  # whole only into an empty pipe
            emitter._taken_at = max(emitter._taken_at, room(emitter, stall).taken_at)  # its reader's progress
            break
        try:
            written = os.write(emitter._fd, backlog[:cut])
        except BlockingIOError:
            break
        emitter.sent += written
        del backlog[:written]
        emitter._taken_at = time.monotonic()
        if written == cut and emitter._watch is not None:
            emitter._watch.went()  # a long line gone whole: the next waits afresh
    if not backlog:
        emitter._unwatch()
        return
    if len(backlog) > BACKLOG_MOST:
        raise OSError(errno.ENOBUFS, f"its reader fell more than {BACKLOG_MOST} bytes behind")
    if time.monotonic() - emitter._taken_at >= stall:
        raise OSError(errno.ETIMEDOUT, f"its reader took nothing for {stall:g}s")


def drain(emitter, stall: float) -> bool:
    """``Emitter.drained`` with a backlog: pushed on (or the stream failed); whether none is left."""
    try:
        push(emitter, stall)
    except OSError as exc:
        emitter._fail(exc)
    arm(emitter, stall)
    return not emitter._backlog


def finish(emitter, stall: float) -> None:
    """What waits in the backlog of a run closed before it waited for its reader (an internal
    failure of its host): written here, in ``push``'s whole lines, waiting for the pipe as the
    write does, until its reader counts as stalled (raises OSError)."""
    while emitter._backlog:
        push(emitter, stall)
        if emitter._backlog:
            room(emitter, stall).wait(stall)
