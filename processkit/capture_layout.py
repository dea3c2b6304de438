"""``capture-keep.json``: which byte ranges of each stream a ring capture's files hold, at the
end of the run and while it captures (for a runner killed before its end).

``output_captured`` cannot say it (the v1 schema allows no added field in a stream's object, nor
in the event), so a run with ``--capture-keep tail`` or ``head-tail`` writes this file beside
``stdout.log`` and ``stderr.log`` just before the event: per stream the digest and counts the
event reports and ``kept``, the stream's ``[start, end)`` byte ranges in file order. A head run
writes none (its file is the stream's first ``bytes_written`` bytes). Readers (``events.kept``, for
``report``, ``events`` and the Python API) take it only when its run id, digest and count match the stream they read, so a
file left by an earlier run in the same directory is never applied to another run's files; a
capture without a matching record is read as a head capture.

While the run captures, the file is a live record instead (``"state": "capturing"``, written
before the child starts, so before any ring can wrap): the layout (``head``, ``cap``), and the
name of a small file beside it, ``capture-keep.marks``, where both pumps keep each stream's ring
counters up to date through a shared mapping (a store per chunk, no system call): how many
stream bytes went to the file, the chunk's end announced before any of its bytes is stored,
``ring_from`` and the write error (published after the chunk in that order, the count before the
error, so a latched error always comes with its final count). A runner killed at any instant leaves counters from which a
reader works out which stream ranges the unordered ring holds, and where (``events.kept.salvage``):
the bytes of a chunk being stored when it died are left out. The marks are retired (their magic
cleared, the file removed) before the ring is put in order.

The capture files themselves are named here too (``FILE_NAMES``), for the engine that writes
them and every reader of a capture directory alike.
"""

from __future__ import annotations

import os

from .diagnostics import warn
from .jsontext import dumps
from .writeall import write_all

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

STREAMS = ("stdout", "stderr")  # the captured streams, in the order of their marks
FILE_NAMES = {stream: f"{stream}.log" for stream in STREAMS}  # each one's capture file in its directory
NAME = "capture-keep.json"
MARKS_NAME = "capture-keep.marks"
VERSION = 1
MAX_BYTES = 64 * 1024
FRESH_TRIES = 8  # fresh names tried for a record before giving up (``_placed``)
FRESH_BYTES = 6  # random bytes in a fresh name, as hex: .capture-keep.json.<12 hex digits>
CAPTURING = "capturing"  # a live record's state: the run had not ended when it was written

# capture-keep.marks: MAGIC, then a TAG_BYTES digest of the run id, then per stream (stdout, then
# stderr) MARK_COUNT unsigned 64-bit counters in the host's byte order, at these indexes (the
# native pump's are csrc/pump.h's PK_MARK_*).
MAGIC = b"pkmarks1"
TAG_BYTES = 24
STORED, PENDING, RING_FROM, WRITE_ERROR = range(4)
MARK_COUNT = 4
MARKS_SIZE = len(MAGIC) + TAG_BYTES + 2 * MARK_COUNT * 8


def kept_ranges(head: int, ring: int, stored: int, ring_from: int) -> tuple[tuple[int, int], ...]:
    """The stream's byte ranges the file holds, in file order, once ``stored`` bytes went in
    (``ring_from``: the pump's, see csrc/pump.h); the engine's final
    record and a killed runner's salvage (``events.kept``) both work them out here."""
    ranges = []
    if min(stored, head):
        ranges.append((0, min(stored, head)))
    start = max(ring_from, stored - ring, head)
    if ring and stored > start:
        if ranges and ranges[-1][1] == start:
            ranges[-1] = (0, stored)
        else:
            ranges.append((start, stored))
    return tuple(ranges)


def record(directory: str, run_id: str, keep: str, reports: dict, live: bool = False) -> None:
    """Write the layout of ``reports`` (stream name -> the engine's CaptureReport) beside the
    capture files; best effort (a warning when it cannot). ``live``: this run wrote the live
    record (``start`` returned its marks)."""
    caps = {report.cap for report in reports.values()}
    document: dict = {"layout_version": VERSION, "run_id": run_id, "keep": keep, "cap": caps.pop() if caps else None}
    for name, report in reports.items():
        document[name] = {
            "sha256": report.sha256,
            "bytes_seen": report.bytes_seen,
            "bytes_written": report.bytes_written,
            "kept": [list(span) for span in report.kept],
        }
    data = (dumps(document) + "\n").encode("utf-8")
    try:
        _write(directory, NAME, data)
    except OSError as exc:
        why = f"could not record which part of each stream the capture files keep: {exc.strerror or exc}"
        # The live record ("capturing") must not outlast the run: dropped, and its space (a full
        # disk's last block) tried once more for the final one.
        try:
            dropped = _drop(directory, NAME)
        except OSError as refused:
            # Still there only when this run wrote it and the entry is its own (a refusal of an
            # entry that is not this user's regular file has no errno: no live record of ours).
            ours = live and refused.errno is not None
            warn(f"{why}; {os.path.join(directory, NAME)} still says the capture is going on" if ours else why)
            return
        try:
            if dropped:
                _write(directory, NAME, data)
                return
        except OSError:
            pass
        warn(f"{why}; no {NAME} is left" + (" (the live record was removed)" if dropped else ""))


def _drop(directory: str, name: str) -> bool:
    """Remove ``name`` where a record written there would replace it (this user's regular file,
    as ``_placed``): whether one was removed."""
    dir_fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _replaceable(dir_fd, directory, name) is None:
            return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    finally:
        os.close(dir_fd)


def _replaceable(dir_fd: int, directory: str, name: str) -> os.stat_result | None:
    """What is at ``name`` (None: nothing), refused (an OSError with no errno) unless it is this
    user's regular file: the one entry a record may replace or remove."""
    import stat

    try:
        found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
        raise OSError(f"{os.path.join(directory, name)} is not a regular file of this user's")
    return found


def _placed(directory: str, name: str, fill: Callable[[int], T]) -> T:
    """A fresh file of this user's at ``name`` in ``directory``, ``fill(fd)``'s result: made under
    a new name (O_EXCL) and renamed over ``name``, so nothing is ever written through what is
    at ``name`` (a link, a FIFO, a hard link another user planted in a shared capture directory,
    ``/tmp`` itself, where ``fs.protected_hardlinks`` is off), and a second name the user gave
    the old record (``cp -al``) keeps it. What is there is replaced only when it is this user's
    regular file (never a symlink, never another user's). Both names are taken through one
    descriptor of the directory, so it cannot be swapped between them: an ``O_PATH`` one, which
    needs no read permission (a capture directory may be write-and-search only, mode 0300), and
    follows a link to the directory as the capture files' own opens do."""
    dir_fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(FRESH_TRIES):
            fresh = f".{name}.{os.urandom(FRESH_BYTES).hex()}"
            try:
                fd = os.open(
                    fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd
                )
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no fresh name for {name} in {directory}")
        try:
            made = fill(fd)
            _replaceable(dir_fd, directory, name)
            os.rename(fresh, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _remove(fresh, dir_fd)
            raise
        finally:
            os.close(fd)
        return made
    finally:
        os.close(dir_fd)


def _sweep_left(directory: str) -> None:
    """Remove the fresh names (``_placed``) a runner killed between making one and renaming it
    left in ``directory`` (``freshnames.sweep``: only this user's regular files, no longer
    being filled), looked for by name first: the sweep's module is loaded only where one is."""
    try:
        names = os.listdir(directory)
    except OSError:
        return  # a directory this user cannot list (mode 0300) is left as it is
    prefixes = (f".{NAME}.", f".{MARKS_NAME}.")
    if any(name.startswith(prefixes) for name in names):
        from .freshnames import fresh_of, sweep

        sweep(directory, lambda name: any(fresh_of(name, prefix, None, 2 * FRESH_BYTES, "") for prefix in prefixes))


def _write(directory: str, name: str, data: bytes) -> None:
    _placed(directory, name, lambda fd: write_all(fd, data))


def run_tag(run_id: str) -> bytes:
    """What ties a marks file to its run's live record."""
    import hashlib

    return hashlib.sha256(run_id.encode("utf-8", "surrogateescape")).digest()[:TAG_BYTES]


class Marks:
    """A live ring capture's counters, shared with the file ``capture-keep.marks``: ``slots[name]``
    is a stream's MARK_COUNT counters (a writable memoryview of unsigned 64-bit integers) the
    pumps store into. ``retire`` clears the magic and removes the file once the ring is to be put
    in order (the counters no longer describe it); ``forget`` removes the live record too."""

    def __init__(self, directory: str, mapping, slots: dict):
        self._directory = directory
        self._mapping = mapping
        self.slots = slots
        self._retired = False

    def retire(self) -> None:
        if self._retired:
            return
        self._retired = True
        self._mapping[: len(MAGIC)] = bytes(len(MAGIC))
        _remove(os.path.join(self._directory, MARKS_NAME))

    def forget(self) -> None:
        self.retire()
        _remove(os.path.join(self._directory, NAME))


def _remove(path: str, dir_fd: int | None = None) -> None:
    try:
        os.unlink(path, dir_fd=dir_fd)
    except OSError:
        pass  # gone already: nothing of it is read without the other


def _mapped(fd: int):
    """The marks file's MARKS_SIZE bytes, mapped shared (zeros: no magic yet)."""
    import mmap

    os.ftruncate(fd, MARKS_SIZE)
    return mmap.mmap(fd, MARKS_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


def start(directory: str, run_id: str, keep: str, cap: int, head: int) -> Marks | None:
    """Before the child starts: the live record and its marks file, mapped. Best effort: None
    when either cannot be written, and then a killed runner leaves nothing a reader applies (a
    record that cannot be written warns once, at the run's end, as the final one fails too)."""
    document = {
        "layout_version": VERSION,
        "run_id": run_id,
        "keep": keep,
        "cap": cap,
        "state": CAPTURING,
        "head": head,
        "marks": MARKS_NAME,
    }
    _sweep_left(directory)  # once a ring run: a head run makes no fresh names
    try:
        _write(directory, NAME, (dumps(document) + "\n").encode("utf-8"))
    except OSError:
        return None
    try:
        mapping = _placed(directory, MARKS_NAME, _mapped)
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        warn(f"could not keep the capture ring's marks, so a killed runner's ring could not be read back: {why}")
        return None
    mapping[len(MAGIC) : len(MAGIC) + TAG_BYTES] = run_tag(run_id)
    counters = memoryview(mapping)[len(MAGIC) + TAG_BYTES :].cast("Q")
    slots = {name: counters[index * MARK_COUNT : (index + 1) * MARK_COUNT] for index, name in enumerate(STREAMS)}
    for slot in slots.values():
        slot[RING_FROM] = head
    mapping[: len(MAGIC)] = MAGIC  # last: the counters are ready
    return Marks(directory, mapping, slots)
