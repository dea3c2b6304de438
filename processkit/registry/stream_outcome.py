"""A run's ``runner_exit``, read back from the JSONL its record published, as the reference's
``wait`` reads it (docs/control-plane.md §2.7).

A path names a file, not a run: another run given the same ``--jsonl`` truncates it and writes
its own events there. So a stream counts as this run's only when the first v1 ``run_started`` in
its head (the first 64 KiB, or its first line whole where that is longer, within 1 MiB) names
this run id (``events.names_run``, as reads by run id judge it); only then is its tail (the
last 64 KiB) scanned for the last well-formed v1 ``runner_exit``. The tail's first line is dropped only when the window starts mid-line, which
the byte before the window says.

Each read (``Stream.read``) answers one of three things: the outcome; nothing yet (the runner may still write
it: worth reading again); or nothing ever (``SETTLED``: a stream that is no regular file, a
relative locator, a file another user owns, a head naming another run, a stream that ended
without this run's ``run_started``, as a run whose spawn failed), so the waiter stops at once.
"""

from __future__ import annotations

import os

from ..bounded import LINE_BYTES, RUN_FILE, WrongKind, loads, open_input
from ..events import is_v1, names_run
from ..pathtrust import trusted

WINDOW_BYTES = 64 * 1024  # the head and the tail read, each
INT32 = range(-(2**31), 2**31)
SETTLED = "settled"  # no later read of this stream can find this run's outcome


class Stream:
    """One waiter's reads of one run's stream, each answering as ``read`` says. What cannot
    change between reads is decided once per file: a retry (``waiting.outcome``, every 10 ms
    for up to 3 s) judges the head again only for another file at the path (another inode) or
    for one emptied in place (another run given the same ``--jsonl`` truncates it and keeps its
    inode: the few bytes up to this run's ``run_started`` are read again and compared, not
    parsed), and scans only the lines that arrived since the last read (a complete line read
    once held no outcome and never will)."""

    def __init__(self, path: str, run_id: str):
        self.path = path
        self.run_id = run_id
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file judged this run's
        self._proof = b""  # that file's bytes up to the end of this run's run_started line
        self._scanned = 0  # where its lines not yet scanned begin

    def read(self) -> dict | str | None:
        """``runner_exit``'s code, source and child_code; None when it is not there (yet);
        ``SETTLED`` when it never will be."""
        if not os.path.isabs(self.path):  # a locator relative to whom? The reference reads none either
            return SETTLED
        try:
            fd = open_input(self.path, RUN_FILE)  # a regular file only: a FIFO's open never waits
        except WrongKind:  # a FIFO, a device, a directory: no retry makes it a stream to read
            return SETTLED
        except (OSError, ValueError):  # ValueError: bounded.InputError
            return None
        try:
            return self._read(fd)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _read(self, fd: int) -> dict | str | None:
        status = os.fstat(fd)
        # The runner writes its stream as this user: another user's file at the path was put in
        # its place (a ``--jsonl`` in their directory, renamed away), its outcome theirs to choose.
        if not trusted(status.st_uid):
            return SETTLED
        identity = (status.st_dev, status.st_ino)
        head = None
        if identity != self._identity or os.pread(fd, len(self._proof), 0) != self._proof:
            self._identity = None
            head = _head(fd)
            owner = _owner(head, self.run_id)
            if owner == 0:
                return SETTLED
            if owner is None:  # no run_started of this run: the reference's unknown; final once its runner ended
                return SETTLED if _last_exit(*_tail(fd, status.st_size, head, 0))[0] is not None else None
            self._identity, self._proof, self._scanned = identity, head[:owner], owner
        found, scanned = _last_exit(*_tail(fd, status.st_size, head, self._scanned))
        # The judgement and the scan are two reads: another run may have emptied the file and
        # written its whole stream between them. Its bytes never hold this run's run_started,
        # so an outcome counts only while the proof is still in place.
        if found is not None and os.pread(fd, len(self._proof), 0) != self._proof:
            self._identity = None
            return None
        if found is None:  # once found, a later read finds it again
            self._scanned = scanned
        return found


def _head(fd: int) -> bytes:
    """The stream's first ``WINDOW_BYTES``; or, where its first line is longer (``run_started``
    with ``--argv-raw`` holds the argv: one argument may take 128 KiB), up to the end of that
    line, within the ``LINE_BYTES`` a line may take: cut, it would never name this run."""
    head = os.pread(fd, WINDOW_BYTES, 0)
    if len(head) < WINDOW_BYTES or b"\n" in head:
        return head
    longer = os.pread(fd, LINE_BYTES + 1, 0)
    end = longer.find(b"\n")
    return longer if end < 0 else longer[: end + 1]


def _tail(fd: int, size: int, head: bytes | None, scanned: int) -> tuple[bytes, int]:
    """The stream's whole lines from ``scanned`` (a line's start) to its end, within its last
    ``WINDOW_BYTES`` (a line the window begins inside is dropped: the byte before the window
    says whether it does), and where they begin. ``head``, when given, is the stream's first
    ``WINDOW_BYTES``: the whole stream when shorter."""
    if head is not None and len(head) < WINDOW_BYTES:  # the whole stream is in the head
        return head[scanned:], scanned
    start = max(scanned, size - WINDOW_BYTES)
    if start == scanned:
        return os.pread(fd, WINDOW_BYTES, start), start
    window = os.pread(fd, WINDOW_BYTES + 1, start - 1)  # the byte before the tail, and the tail
    cut = window.find(b"\n") + 1
    return (window[cut:], start - 1 + cut) if cut else (b"", scanned)


def _owner(head: bytes, run_id: str) -> int | None:
    """Where the line after the head's first v1 ``run_started`` begins, when that names
    ``run_id``; 0 when it names another run (the file was taken over: that never changes back);
    None when the head holds none yet."""
    begin = 0
    for line in head.split(b"\n"):
        begin += len(line) + 1
        event = _event(line)
        ours = None if event is None else names_run(event, run_id)
        if ours is not None:
            return min(begin, len(head)) if ours else 0
    return None


def _last_exit(lines: bytes, start: int) -> tuple[dict | None, int]:
    """The last well-formed v1 ``runner_exit`` in ``lines``, which begin at ``start`` in the
    stream (one that is not is passed over, as the reference passes it); and where the lines not
    yet scanned whole begin: after the last newline (a line still being written is scanned again
    once whole)."""
    scanned = start + lines.rfind(b"\n") + 1
    for line in reversed(lines.split(b"\n")):
        event = _event(line)
        if event is None or event.get("event") != "runner_exit" or not is_v1(event):
            continue
        code, source, child_code = event.get("code"), event.get("source"), event.get("child_code")
        if _int32(code) and isinstance(source, str) and (child_code is None or _int32(child_code)):
            return {"code": code, "source": source, "child_code": child_code}, scanned
    return None, scanned


def _event(line: bytes) -> dict | None:
    try:
        event = loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too; a line cut short
        return None
    return event if isinstance(event, dict) else None


def _int32(value) -> bool:
    return type(value) is int and value in INT32
