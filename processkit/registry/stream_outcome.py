"""A run's ``runner_exit``, read back from the JSONL its record published, as the reference's
``wait`` reads it (docs/control-plane.md §2.7).

A path names a file, not a run: another run given the same ``--jsonl`` truncates it and writes
its own events there. So a stream counts as this run's only when its head (the first 64 KiB)
holds a v1 ``run_started`` naming this run id; only then is its tail (the last 64 KiB) scanned
for the last well-formed v1 ``runner_exit``. The tail's first line is dropped only when the
window starts mid-line, which the byte before the window says.

Each read answers one of three things: the outcome; nothing yet (the runner may still write
it: worth reading again); or nothing ever (``SETTLED``: a stream that is no regular file, a
relative locator, a file another user owns, a head naming another run, a stream that ended
without this run's ``run_started``, as a run whose spawn failed), so the waiter stops at once.
"""

from __future__ import annotations

import os

from ..bounded import RUN_FILE, WrongKind, loads, open_input
from ..events import SCHEMA_VERSION
from ..pathtrust import trusted

WINDOW_BYTES = 64 * 1024  # the head and the tail read, each
INT32 = range(-(2**31), 2**31)
SETTLED = "settled"  # no later read of this stream can find this run's outcome


def read(path: str, run_id: str) -> dict | str | None:
    """``runner_exit``'s code, source and child_code; None when it is not there (yet);
    ``SETTLED`` when it never will be."""
    if not os.path.isabs(path):  # a locator relative to whom? The reference reads none either
        return SETTLED
    try:
        fd = open_input(path, RUN_FILE)  # a regular file only: a FIFO's open never waits
    except WrongKind:  # a FIFO, a device, a directory: no retry makes it a stream to read
        return SETTLED
    except (OSError, ValueError):  # ValueError: bounded.InputError
        return None
    try:
        # The runner writes its stream as this user: another user's file at the path was put in
        # its place (a ``--jsonl`` in their directory, renamed away), its outcome theirs to choose.
        if not trusted(os.fstat(fd).st_uid):
            return SETTLED
        head = os.pread(fd, WINDOW_BYTES, 0)
        owner = _owner(head, run_id)
        if owner is False:
            return SETTLED
        found = _last_exit(*_tail(fd, head))
    except OSError:
        return None
    finally:
        os.close(fd)
    if owner is None:  # no run_started of this run: the reference's unknown; final once its runner ended
        return SETTLED if found is not None else None
    return found


def _tail(fd: int, head: bytes) -> tuple[bytes, bool]:
    """The stream's last ``WINDOW_BYTES``, and whether they begin a line."""
    if len(head) < WINDOW_BYTES:  # the whole stream is in the head
        return head, True
    start = max(0, os.fstat(fd).st_size - WINDOW_BYTES)
    if start == 0:
        return os.pread(fd, WINDOW_BYTES, 0), True
    window = os.pread(fd, WINDOW_BYTES + 1, start - 1)  # the byte before the tail, and the tail
    return window[1:], window[:1] == b"\n"


def _owner(head: bytes, run_id: str) -> bool | None:
    """True when the head holds a v1 ``run_started`` naming ``run_id``; False when it names
    only other runs (the file was taken over: that never changes back); None when it names
    none yet."""
    others = False
    for line in head.split(b"\n"):
        event = _event(line)
        if event is None or event.get("event") != "run_started" or not _v1(event):
            continue
        if event.get("run_id") == run_id:
            return True
        others = True
    return False if others else None


def _last_exit(tail: bytes, at_line_start: bool) -> dict | None:
    """The last well-formed v1 ``runner_exit`` in ``tail`` (one that is not is passed over, as
    the reference passes it); its first line is skipped when the window began mid-line."""
    if not at_line_start:
        cut = tail.find(b"\n")
        if cut < 0:
            return None
        tail = tail[cut + 1 :]
    for line in reversed(tail.split(b"\n")):
        event = _event(line)
        if event is None or event.get("event") != "runner_exit" or not _v1(event):
            continue
        code, source, child_code = event.get("code"), event.get("source"), event.get("child_code")
        if _int32(code) and isinstance(source, str) and (child_code is None or _int32(child_code)):
            return {"code": code, "source": source, "child_code": child_code}
    return None


def _event(line: bytes) -> dict | None:
    try:
        event = loads(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError too; a line cut short
        return None
    return event if isinstance(event, dict) else None


def _v1(event: dict) -> bool:
    version = event.get("schema_version")
    return type(version) is int and version == SCHEMA_VERSION


def _int32(value) -> bool:
    return type(value) is int and value in INT32
